// The executor runs a Schedule over a Transport: Execution is one schedule in flight (resumable,
// it never waits), Executor runs one to completion on the calling thread. The progress engine
// (operation_queue.h) advances many executions of one communicator at once.
//
// Waiting (runtime/base/waiter.h): poll the transport, spin for WEFT_SPIN_US microseconds
// (default 50) with no progress, then yield for a while, then sleep in Transport::wait_for_event
// (UCX: the worker's event fd) so that ranks and threads outnumbering cores do not starve each other.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/schedule.h"
#include "runtime/base/wait_note.h"
#include "runtime/base/waiter.h"
#include "runtime/transport/transport.h"

namespace weft {

struct ExecBuffers {
  const void* send = nullptr;
  void* recv = nullptr;
  void* scratch = nullptr;
};

struct ExecContext {
  Transport* transport = nullptr;
  uint16_t seq = 0;        // the operation's sequence number (in every tag)
  uint16_t signature = 0;  // hash of what all ranks must agree on (checked on every receive)
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds timeout{0};  // what set the deadline (WEFT_TIMEOUT_MS or the group's), for messages
  const std::atomic<bool>* abort = nullptr;
  // Called every ~100 ms while waiting; throws to end the operation (remote abort, dead peer).
  std::function<void()> watchdog;
  // Describes the operation in error messages ("allreduce #12 (count 1000, float32, sum)").
  std::function<std::string()> describe;
  std::chrono::microseconds spin{50};
  // Where to note the peer and step waited on once the spin found no progress (flight recorder).
  WaitNote* wait = nullptr;
};

// Builds the 48-bit tag of a message.
inline uint64_t make_tag(uint16_t seq, uint16_t signature, uint32_t msg) {
  return (uint64_t{seq} << 32) | (uint64_t{signature} << 16) | (msg & 0xffffu);
}
inline constexpr uint64_t kTagMatchMask = (uint64_t{0xffff} << 32) | 0xffffu;  // seq and msg, not signature
inline uint16_t tag_signature(uint64_t tag) { return static_cast<uint16_t>(tag >> 16); }

// One schedule in flight, resumable: advance() posts every step whose dependencies are met, runs
// reductions and copies inline, and collects the transport's completions; it never waits. The
// caller drives the transport (Transport::progress) between advances, so that any number of
// executions share one transport and one waiting thread (the progress engine) or run alone
// (Executor::run). Steady-state calls do not allocate: the state is reused by the next start().
class Execution {
 public:
  Execution() = default;
  Execution(const Execution&) = delete;
  Execution& operator=(const Execution&) = delete;
  // s, bufs and ctx must outlive the execution (until done() or a throw).
  void start(const Schedule& s, const ExecBuffers& bufs, ExecContext& ctx);
  // Posts what is ready and collects what completed; true when anything moved. Throws weft::Error
  // when a step failed (the transport is shut down first, so no pending step touches the
  // caller's buffers after the throw).
  bool advance();
  bool done() const { return completed_ == n_; }
  // Nothing moved for a while (past the spin): notes the wait for the flight recorder, and throws
  // on weftCommAbort, the deadline, a dead peer this execution waits on, or the watchdog.
  void on_idle(std::chrono::steady_clock::time_point now);
  const ExecContext& context() const { return *ctx_; }

 private:
  void grow(size_t steps);
  void complete(StepId id);
  void post(StepId id);
  [[noreturn]] void abort_with(ErrorCode code, const std::string& msg);
  [[noreturn]] void mismatch(int peer, uint64_t sender_tag, size_t got, size_t want);
  std::string what() const;
  int waited_peer() const;  // the peer of the first receive in flight, else of the first send

  const Schedule* s_ = nullptr;
  ExecBuffers bufs_;
  ExecContext* ctx_ = nullptr;
  size_t n_ = 0, head_ = 0, completed_ = 0;
  bool fuse_ = false;
  int peer_grace_ = 0;
  Every watchdog_due_{kWatchdogEvery}, peer_check_due_{kPeerCheckEvery};
  std::vector<uint32_t> remaining_;
  std::vector<StepId> ready_;
  std::vector<StepId> inflight_;
  std::unique_ptr<TransportOp[]> ops_;
  size_t ops_capacity_ = 0;
};

// Runs one schedule to completion on the calling thread (a blocking call on an idle
// communicator): advance, drive the transport, and wait with the Waiter when nothing moves.
class Executor {
 public:
  Executor() = default;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  // Runs s to completion or throws weft::Error. On error the transport has been shut down, so
  // no pending operation touches the caller's buffers after this returns.
  void run(const Schedule& s, const ExecBuffers& bufs, ExecContext& ctx);

 private:
  Execution exec_;
};

}  // namespace weft
