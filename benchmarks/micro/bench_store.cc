// The store: set/get and add round trips of one client over TcpStore on loopback (the rendezvous
// path every communicator creation and split goes through). See docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "runtime/store/tcp_store.h"

namespace {

struct Loopback {
  std::shared_ptr<weft::TcpStoreServer> server = std::make_shared<weft::TcpStoreServer>("bench-secret", "127.0.0.1", 0);
  weft::TcpStore client{"127.0.0.1", server->port(), "bench-secret", weft::Millis(10000)};
};

void BM_StoreSetGet(benchmark::State& state) {
  Loopback lb;
  const weft::Bytes value(static_cast<size_t>(state.range(0)), 0x5a);
  int64_t i = 0;
  for (auto _ : state) {
    const std::string key = "k" + std::to_string(i++ & 1023);
    lb.client.set(key, value);
    benchmark::DoNotOptimize(lb.client.get(key, weft::Millis(10000)));
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 2);
}
BENCHMARK(BM_StoreSetGet)->Arg(8)->Arg(4096)->Arg(64 << 10)->Arg(1 << 20)->ArgName("bytes")->UseRealTime();

void BM_StoreAdd(benchmark::State& state) {
  Loopback lb;
  for (auto _ : state) benchmark::DoNotOptimize(lb.client.add("counter", 1));
}
BENCHMARK(BM_StoreAdd)->UseRealTime();

void BM_StoreCheck(benchmark::State& state) {
  Loopback lb;
  lb.client.set("present", weft::Bytes{1});
  for (auto _ : state) benchmark::DoNotOptimize(lb.client.check("present"));
}
BENCHMARK(BM_StoreCheck)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
