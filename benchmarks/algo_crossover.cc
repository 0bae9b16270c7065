// Measures every algorithm of all-reduce, broadcast and reduce (and the ring with 2 channels)
// across message sizes and rank counts, with thread-ranks of one node over the chosen transport
// (auto: Weft's shared memory; ucx: UCX alone), and prints one table per (collective, ranks):
// microseconds per call, the fastest marked with '*', headed by the transport that actually ran.
// docs/ALGORITHMS.md records the crossovers that the algorithm choice uses.
//
//   algo_crossover [max_ranks=4] [max_bytes=16777216] [kinds=allreduce,broadcast,reduce] [transport=auto|ucx]
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/transport/inproc/inproc_transport.h"
#include "runtime/store/memory_store.h"

using namespace weft;
using Clock = std::chrono::steady_clock;

namespace {

// Runs `n` thread-ranks over `transport` with `algo` forced; returns rank 0's mean microseconds per
// call and sets `ran` to the name of the transport rank 0's communicator used.
double measure(int n, CollectiveKind kind, const std::string& algo, int channels, uint64_t bytes,
               const std::string& transport, std::string& ran) {
  auto store = std::make_shared<MemoryStore>();
  auto fabric = std::make_shared<InprocFabric>(n);
  const uint64_t count = std::max<uint64_t>(1, bytes / 4);
  const int iters = bytes <= 65536 ? 200 : bytes <= (1u << 20) ? 20 : 4;
  double result = 0;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      CommInit init;
      init.store = std::make_shared<PrefixStore>(store, "bench");
      init.rank = r;
      init.size = n;
      init.transport = TransportKind::kUcx;
      init.fabric = fabric;
      init.node_id = "node0";
      init.config.algo = algo;
      init.config.transport = transport;
      init.config.channels = channels;
      init.config.spin = std::chrono::microseconds(20);
      auto comm = Communicator::create(init);
      std::vector<float> send(count, 1.0f), recv(count);
      CollectiveArgs a;
      a.kind = kind;
      a.count = count;
      CollectiveArgs barrier;
      barrier.kind = CollectiveKind::kBarrier;
      for (int i = 0; i < 3; ++i) comm->submit(a, send.data(), recv.data());
      comm->submit(barrier, nullptr, nullptr);
      auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) comm->submit(a, send.data(), recv.data());
      comm->submit(barrier, nullptr, nullptr);
      double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
      if (r == 0) {
        result = us;
        ran = comm->transport_name();
      }
      comm->destroy();
    });
  }
  for (auto& t : threads) t.join();
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  int max_ranks = argc > 1 ? std::atoi(argv[1]) : 4;
  uint64_t max_bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 16u << 20;
  std::string kinds = argc > 3 ? argv[3] : "allreduce,broadcast,reduce";
  const std::string transport = argc > 4 ? argv[4] : "auto";
  if (transport != "auto" && transport != "ucx") {
    fmt::print(stderr, "algo_crossover: transport must be auto or ucx, not '{}'\n", transport);
    return 2;
  }
  struct Choice { std::string id; int channels; };
  struct Kind { CollectiveKind kind; std::vector<Choice> algos; };
  std::vector<Kind> all = {
      {CollectiveKind::kAllReduce, {{"ring", 1}, {"ring", 2}, {"tree", 1}, {"rhd", 1}}},
      {CollectiveKind::kBroadcast, {{"chain", 1}, {"binomial", 1}}},
      {CollectiveKind::kReduce, {{"chain", 1}, {"binomial", 1}}},
  };
  for (const Kind& k : all) {
    if (kinds.find(collective_name(k.kind)) == std::string::npos) continue;
    for (int n = 2; n <= max_ranks; ++n) {
      std::string ran;
      (void)measure(n, k.kind, k.algos[0].id, 1, 8, transport, ran);  // learns the transport for the heading
      fmt::print("\n{} over {}, {} thread-ranks (us per call, * = fastest)\n{:>10}", collective_name(k.kind), ran, n, "bytes");
      for (auto& c : k.algos) fmt::print(" {:>12}", c.channels > 1 ? fmt::format("{}x{}", c.id, c.channels) : c.id);
      fmt::print("\n");
      for (uint64_t bytes = 8; bytes <= max_bytes; bytes *= 8) {
        std::vector<double> t;
        for (auto& c : k.algos) t.push_back(measure(n, k.kind, c.id, c.channels, bytes, transport, ran));
        size_t best = 0;
        for (size_t i = 1; i < t.size(); ++i)
          if (t[i] < t[best]) best = i;
        fmt::print("{:>10}", bytes);
        for (size_t i = 0; i < t.size(); ++i) fmt::print(" {:>11.1f}{}", t[i], i == best ? "*" : " ");
        fmt::print("\n");
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
