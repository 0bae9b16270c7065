// Metrics in Prometheus's text exposition format (docs/OBSERVABILITY.md, "Metrics"): per
// communicator, collective and algorithm the calls, bytes, a latency histogram, the last call's
// bus bandwidth and the errors (CommMetrics, written by the communicator's executing thread only:
// relaxed loads and stores, no lock); per step of the overlap reducer and of the PyTorch backend
// the step time, the exposed sync time and the sync share. On only when WEFT_METRICS_PORT (HTTP,
// port + local rank, path /metrics) or WEFT_METRICS_FILE (rewritten atomically every
// WEFT_METRICS_INTERVAL_MS and when the last communicator goes) is set.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/base/collective_kind.h"
#include "runtime/trace/observer.h"

namespace weft {

class MetricsServer;  // metrics_http.cc

// Latency buckets (upper bounds, seconds) of weft_collective_latency_seconds.
inline constexpr std::array<double, 22> kLatencyBuckets = {1e-6, 2.5e-6, 5e-6, 1e-5,  2.5e-5, 5e-5, 1e-4, 2.5e-4,
                                                           5e-4, 1e-3,   2.5e-3, 5e-3, 1e-2,  2.5e-2, 5e-2, 0.1,
                                                           0.25, 0.5,    1.0,    2.5,  5.0,   10.0};

class CommMetrics final : public CallObserver {
 public:
  static constexpr int kAlgorithms = 12;  // distinct algorithms per collective on one communicator
  CommMetrics(int rank, int size) : rank_(rank), size_(size) {}
  // A finished call of `bytes` (the call's data: nccl-tests' size) that took `ns`.
  void observe(CollectiveKind kind, const char* algorithm, uint64_t bytes, int64_t ns);
  void error(CollectiveKind kind) { bump(errors_[static_cast<size_t>(kind)], 1); }
  void call_ended(const CallEnd& e) override {
    observe(e.args.kind, e.algorithm, e.bytes(), std::chrono::duration_cast<std::chrono::nanoseconds>(e.t1 - e.t0).count());
  }
  // Appends this communicator's samples of every family to `families` (one string per family, in
  // MetricsRegistry's order). `labels`: rank="..",comm=".."
  void expose(std::vector<std::string>& families, const std::string& labels) const;

 private:
  struct Cell {
    std::atomic<const char*> algorithm{nullptr};
    std::atomic<uint64_t> calls{0}, bytes{0}, sum_ns{0};
    std::atomic<uint64_t> buckets[kLatencyBuckets.size()] = {};
    std::atomic<double> busbw{0};
  };
  static void bump(std::atomic<uint64_t>& c, uint64_t d) { c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed); }
  double bus_factor(CollectiveKind kind) const;

  int rank_, size_;
  Cell cells_[kNumCollectiveKinds][kAlgorithms];
  std::atomic<uint64_t> errors_[kNumCollectiveKinds] = {};
};

class MetricsRegistry {
 public:
  static MetricsRegistry& instance();
  // WEFT_METRICS_PORT or WEFT_METRICS_FILE set (read once).
  static bool enabled();
  // The job's ranks (world communicator): starts the file writer and the HTTP endpoint once.
  void start(int world_rank, int local_rank);
  uint64_t attach(const std::string& comm, int rank, const CommMetrics* metrics);
  void detach(uint64_t handle);
  // One training step of `source` ("reducer", "torch"): its time and the part of it spent waiting
  // for gradient synchronisation that the backward did not hide.
  void record_step(const std::string& source, double step_seconds, double exposed_sync_seconds);
  // The exposition text.
  std::string text();
  // Writes WEFT_METRICS_FILE now (atomically); false when not set or it failed (logged).
  bool write_file();
  std::string file_path();  // WEFT_METRICS_FILE for this rank ("" when unset)
  int port() const { return bound_port_; }  // the HTTP port served, -1 when none

 private:
  MetricsRegistry() = default;
  struct Entry {
    uint64_t handle;
    std::string comm;
    int rank;
    const CommMetrics* metrics;
  };
  struct Steps {
    std::string source;
    uint64_t steps = 0;
    double step_s = 0, exposed_s = 0, last_step_s = 0, last_exposed_s = 0;
  };
  void writer_loop(std::chrono::milliseconds interval);

  std::mutex mu_;
  std::vector<Entry> entries_;
  std::vector<Steps> steps_;
  uint64_t next_handle_ = 1;
  int world_rank_ = -1;
  bool started_ = false;
  std::thread writer_;
  std::shared_ptr<MetricsServer> server_;
  std::atomic<int> bound_port_{-1};
};

}  // namespace weft
