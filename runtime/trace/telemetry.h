// Telemetry: what one communicator tells about itself — its flight recorder (registered with the
// process's TraceRegistry, so that it is dumped on errors, aborts, SIGUSR1 and weftCommDump).
// The Communicator owns one and calls its recorder on the hot path. docs/OBSERVABILITY.md.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "runtime/trace/flight_recorder.h"

namespace weft {

class Store;

struct TelemetryInit {
  std::string name;  // the same on every rank of the communicator
  int rank = 0, size = 1;
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
  // The first failure of an operation on this communicator: writes the dump; returns its path
  // ("" when written before, or when it could not be).
  std::string on_failure(const std::string& why);
  // Writes the dump now (weftCommDump, weftCommAbort); returns its path or "".
  std::string dump(const std::string& reason);

 private:
  std::unique_ptr<FlightRecorder> recorder_;
  uint64_t handle_ = 0;
  std::atomic<bool> failure_dumped_{false};
};

}  // namespace weft
