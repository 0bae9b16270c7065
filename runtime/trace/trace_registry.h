// TraceRegistry: the process's communicators that keep a flight recorder, and the writing of their
// dump: one JSON file per process (rank<R>.json, R the world rank) in WEFT_DUMP_DIR, default
// /tmp/weft-dumps/<job id agreed by the world's ranks>. Written atomically (a temporary file
// renamed), by the thread that asks (an error, an abort, weftCommDump) or by the registry's watch
// thread: SIGUSR1 (blocked in the threads that register communicators and read from a signalfd, so that
// a dump request interrupts nothing of the program's) and another rank's published failure
// noticed while this rank is busy elsewhere. docs/OBSERVABILITY.md.
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace weft {

class FlightRecorder;

struct TraceSource {
  std::string name;  // the same on every rank of the communicator: "world", "world/split0.c1", ...
  int rank = 0, size = 1;
  const FlightRecorder* recorder = nullptr;
  std::function<std::string()> broken;          // why the communicator is broken ("" = healthy)
  std::function<std::string()> last_error;
  // The failure another rank published ("" = none); may throw when the store is unreachable.
  std::function<std::string()> remote_failure;
};

class TraceRegistry {
 public:
  static TraceRegistry& instance();
  // Registers a communicator (starts the watch thread and the SIGUSR1 handler with the first);
  // returns the handle for detach().
  uint64_t attach(TraceSource source);
  void detach(uint64_t handle);
  // The world communicator of this process names the job (its ranks agree on `job`) and the file.
  void set_world(const std::string& job, int world_rank);
  // Writes every registered communicator's recorder; returns the file's path, "" when it failed
  // (logged) or nothing is registered.
  std::string dump(const std::string& reason);
  std::string dir();   // where dumps go (WEFT_DUMP_DIR or the default)
  std::string path();  // the file this process writes

  // The operations of communicator `name` recorded from record `from` on: the latest time one was
  // queued or started (its launch) and the latest time one finished (0 when none), and the number
  // after the last record seen (the next window's `from`). For step metrics (weft_torch.step_end).
  struct Window {
    int64_t last_launch_ns = 0, last_finish_ns = 0;
    uint64_t next = 0;
  };
  Window window(const std::string& name, uint64_t from);

  // The dump as JSON (what dump() writes).
  nlohmann::json to_json(const std::string& reason);

 private:
  TraceRegistry() = default;
  struct Entry {
    uint64_t handle;
    TraceSource source;
    bool remote_dumped = false;
  };
  void watch(uint64_t generation, int signal_fd);
  void start_locked();
  void stop();
  nlohmann::json to_json_locked(const std::string& reason);
  std::string path_locked();

  std::mutex mu_;
  std::mutex write_mu_;  // one writer of the file at a time
  std::vector<Entry> entries_;
  uint64_t next_handle_ = 1;
  std::string job_;
  int world_rank_ = -1;
  std::thread thread_;
  uint64_t generation_ = 0;  // the running watch thread's; bumped by stop()
  int pipe_[2] = {-1, -1};  // the SIGUSR1 handler writes, the watch thread reads
  bool owns_sigusr1_ = false;  // the program has no SIGUSR1 handler of its own
  int signal_fd_ = -1;         // SIGUSR1, blocked in the program's threads, read by the watch thread
};

}  // namespace weft
