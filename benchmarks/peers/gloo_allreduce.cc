// Peer harness for benchmarks/compare: Gloo's allreduce (ring, float32 sum, out of place) over its
// TCP device on loopback, rendezvous through a FileStore; timed exactly as weft-perf times Weft:
// time per call = elapsed / N, the MAXIMUM over ranks (weft-perf and nccl-tests' -a 3).
//
//   peer_gloo_allreduce RANK SIZE STORE_DIR SIZE:ITERS:WARMUP[,...]
// prints CSV on rank 0: size,time_us,algbw,busbw,wrong. Every rank sends rank+1 in every element,
// so every element of the result must be n(n+1)/2; wrong = the elements of the last timed call's
// result that differ from it, summed over ranks (0: all right).
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s RANK SIZE STORE_DIR SIZE:ITERS:WARMUP[,...]\n", argv[0]);
    return 2;
  }
  const int rank = std::atoi(argv[1]), n = std::atoi(argv[2]);
  struct Spec {
    size_t bytes;
    int iters, warm;
  };
  std::vector<Spec> specs;
  size_t max = 4;
  std::stringstream ss(argv[4]);
  for (std::string tok; std::getline(ss, tok, ',');) {
    unsigned long long s = 0;
    Spec p{0, 20, 5};
    std::sscanf(tok.c_str(), "%llu:%d:%d", &s, &p.iters, &p.warm);
    p.bytes = std::max<size_t>(4, s);
    max = std::max(max, p.bytes);
    specs.push_back(p);
  }
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(argv[3]);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->setTimeout(std::chrono::seconds(600));
  ctx->connectFullMesh(store, dev);

  std::vector<float> send(max / sizeof(float), static_cast<float>(rank + 1)), recv(max / sizeof(float), 0.0f);
  uint32_t tag = 0;
  auto allreduce_with = [&](auto* in, auto* out, size_t count, void (*fn)(void*, const void*, const void*, size_t)) {
    using T = std::remove_pointer_t<decltype(out)>;
    gloo::AllreduceOptions o(ctx);
    o.setInput(const_cast<T*>(in), count);
    o.setOutput(out, count);
    o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    o.setReduceFunction(fn);
    o.setTag(tag++);
    gloo::allreduce(o);
  };
  auto allreduce = [&](const float* in, float* out, size_t count) {
    allreduce_with(in, out, count, &gloo::sum<float>);
  };
  auto barrier = [&] {
    gloo::BarrierOptions o(ctx);
    o.setTag(tag++);
    gloo::barrier(o);
  };
  if (rank == 0) std::printf("size,time_us,algbw,busbw,wrong\n");
  for (auto& p : specs) {
    const size_t count = p.bytes / sizeof(float);
    for (int i = 0; i < p.warm; ++i) allreduce(send.data(), recv.data(), count);
    barrier();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < p.iters; ++i) allreduce(send.data(), recv.data(), count);
    double per = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / std::max(1, p.iters);
    double t = 0, wrong = 0, all_wrong = 0;
    const float want = static_cast<float>(n * (n + 1) / 2);
    for (size_t i = 0; i < count; ++i) wrong += recv[i] != want;
    allreduce_with(&per, &t, 1, &gloo::max<double>);
    allreduce_with(&wrong, &all_wrong, 1, &gloo::sum<double>);
    const double algbw = static_cast<double>(count * sizeof(float)) / t / 1e9;
    if (rank == 0) {
      std::printf("%zu,%.3f,%.4f,%.4f,%.0f\n", count * sizeof(float), t * 1e6, algbw, algbw * 2.0 * (n - 1) / n,
                  all_wrong);
      std::fflush(stdout);
    }
  }
  barrier();
  return 0;
}
