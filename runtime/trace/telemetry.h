// Telemetry: what one communicator tells about itself — its flight recorder (registered with the
// process's TraceRegistry, so that it is dumped on errors, aborts, SIGUSR1 and weftCommDump).
// The Communicator owns one and calls its recorder on the hot path. docs/OBSERVABILITY.md.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "runtime/base/collective_kind.h"
#include "runtime/trace/flight_recorder.h"
#include "runtime/trace/metrics.h"

namespace weft {

class Store;

struct TelemetryInit {
  std::string name;  // the same on every rank of the communicator
  int rank = 0, size = 1, local_rank = 0;
  bool world = false;  // the job's first communicator: agrees on the job id that names the dump folder
  std::shared_ptr<Store> store;
  std::chrono::milliseconds timeout{300000};
  size_t trace_buffer = 0;  // WEFT_TRACE_BUFFER (0: no recorder)
  std::function<std::string()> broken, last_error;
};

class Telemetry {
 public:
  explicit Telemetry(TelemetryInit init);
  ~Telemetry();
  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;

  // nullptr when WEFT_TRACE_BUFFER=0.
  FlightRecorder* recorder() { return recorder_.get(); }
  // nullptr unless WEFT_METRICS_PORT or WEFT_METRICS_FILE is set.
  CommMetrics* metrics() { return metrics_.get(); }
  // The first failure of an operation on this communicator: writes the dump; returns its path
  // ("" when written before, or when it could not be).
  std::string on_failure(const std::string& why);
  // Writes the dump now (weftCommDump, weftCommAbort); returns its path or "".
  std::string dump(const std::string& reason);
  // Leaves the process's dumps and metrics (the communicator was destroyed); idempotent.
  void detach();

  // A collective and size class (the bit width of its bytes) on this communicator: at
  // WEFT_LOG_LEVEL=info its first call logs the algorithm and why, the calls after it the measured
  // time against the prediction (Communicator::log_algorithm). Only the executing thread uses it.
  struct AlgorithmClass {
    std::string algorithm;  // "" until the first call
    uint32_t calls = 0;
    double first_us = 0, sum_us = 0, predicted_us = -1;
  };
  AlgorithmClass& algorithm_class(CollectiveKind kind, uint64_t bytes);

 private:
  std::unique_ptr<FlightRecorder> recorder_;
  uint64_t handle_ = 0;
  std::unique_ptr<CommMetrics> metrics_;
  uint64_t metrics_handle_ = 0;
  std::atomic<bool> failure_dumped_{false};
  std::array<AlgorithmClass, kNumCollectiveKinds * 65> classes_{};
};

}  // namespace weft
