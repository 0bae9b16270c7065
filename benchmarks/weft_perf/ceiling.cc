#include "ceiling.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace wperf {

double allreduce_bound(int n, double copyn, double addn) {
  if (n < 2 || copyn <= 0 || addn <= 0) return 0;
  const double b = std::max(copyn, 1.5 * addn);
  return 2.0 * (n - 1) * b / (static_cast<double>(n) * n);
}

// Vectorised by hand (GCC's -O2 leaves the plain loop scalar), so the bound is not understated.
static void add_loop(float* __restrict a, const float* __restrict b, size_t n) {
  typedef float v4 __attribute__((vector_size(16)));
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v4 x[4], y[4];
    std::memcpy(x, a + i, sizeof x);
    std::memcpy(y, b + i, sizeof y);
    for (int k = 0; k < 4; ++k) x[k] += y[k];
    std::memcpy(a + i, x, sizeof x);
  }
  for (; i < n; ++i) a[i] += b[i];
}

// Aggregate GB/s of `threads` threads each running op over its own `bytes`-byte buffers; the
// best of several timed rounds, each round as long as the slowest thread.
static double measure(size_t bytes, int threads, bool add) {
  const size_t n = std::max<size_t>(1, bytes / sizeof(float));
  const size_t reps = std::clamp<size_t>((size_t{256} << 20) / (n * sizeof(float)), 1, 100000);
  const int rounds = 5;
  std::vector<double> round_s(rounds, 0);
  std::barrier sync(threads);
  std::vector<std::thread> pool;
  std::vector<std::vector<double>> per(static_cast<size_t>(threads), std::vector<double>(rounds));
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::vector<float> a(n, 1.0f), b(n, 2.0f);  // constructed, so pre-touched
      for (int r = 0; r < rounds; ++r) {
        sync.arrive_and_wait();
        auto t0 = std::chrono::steady_clock::now();
        for (size_t k = 0; k < reps; ++k) {
          if (add) add_loop(a.data(), b.data(), n);
          else std::memcpy(a.data(), b.data(), n * sizeof(float));
          asm volatile("" ::"r"(a.data()) : "memory");
        }
        per[static_cast<size_t>(t)][static_cast<size_t>(r)] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    });
  for (auto& th : pool) th.join();
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    double slowest = 0;
    for (auto& p : per) slowest = std::max(slowest, p[static_cast<size_t>(r)]);
    best = std::min(best, slowest);
  }
  return static_cast<double>(threads) * static_cast<double>(reps * n * sizeof(float)) / best / 1e9;
}

std::vector<CeilingRow> measure_ceiling(const std::vector<size_t>& sizes, int threads) {
  std::vector<CeilingRow> rows;
  for (size_t s : sizes) {
    CeilingRow r;
    r.bytes = s;
    r.copy1 = measure(s, 1, false), r.add1 = measure(s, 1, true);
    r.copyn = threads > 1 ? measure(s, threads, false) : r.copy1;
    r.addn = threads > 1 ? measure(s, threads, true) : r.add1;
    r.bound_busbw = allreduce_bound(threads, r.copyn, r.addn);
    rows.push_back(r);
  }
  return rows;
}

void print_ceiling(const std::vector<CeilingRow>& rows, int threads, const std::string& csv_path) {
  if (!csv_path.empty()) {
    FILE* f = csv_path == "-" ? stdout : std::fopen(csv_path.c_str(), "w");
    if (!f) return (void)std::fprintf(stderr, "weft-perf: cannot write %s\n", csv_path.c_str());
    std::fprintf(f, "size,threads,copy1_GBps,add1_GBps,copyn_GBps,addn_GBps,allreduce_bound_busbw\n");
    for (auto& r : rows)
      std::fprintf(f, "%zu,%d,%.3f,%.3f,%.3f,%.3f,%.3f\n", r.bytes, threads, r.copy1, r.add1, r.copyn, r.addn,
                   r.bound_busbw);
    if (f != stdout) std::fclose(f);
    return;
  }
  std::printf("# weft-perf --ceiling: float32 copy and a += b, GB/s of destination bytes; %d threads\n", threads);
  std::printf("# all-reduce bound (any algorithm, %d ranks) = 2(n-1)/n^2 * max(copy_n, 1.5 add_n)\n", threads);
  std::printf("#%11s %9s %9s %9s %9s %12s\n", "size(B)", "copy_1", "add_1", "copy_n", "add_n", "ar_bound");
  for (auto& r : rows)
    std::printf(" %11zu %9.2f %9.2f %9.2f %9.2f %12.2f\n", r.bytes, r.copy1, r.add1, r.copyn, r.addn, r.bound_busbw);
}

}  // namespace wperf
