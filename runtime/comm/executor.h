// The executor runs a Schedule over a Transport: it posts every step whose dependencies are met,
// runs reductions and copies inline, and drives the transport until every step is done. One
// executor per communicator; it reuses its state so that steady-state calls do not allocate.
//
// Waiting: it polls the transport, spins for WEFT_SPIN_US microseconds (default 50) with no
// progress, then yields for a while, then sleeps in Transport::wait_for_event (UCX: the worker's
// event fd) so that ranks and threads outnumbering cores do not starve each other.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/schedule.h"
#include "runtime/base/wait_note.h"
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

class Executor {
 public:
  Executor() = default;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  // Runs s to completion or throws weft::Error. On error the transport has been shut down, so
  // no pending operation touches the caller's buffers after this returns.
  void run(const Schedule& s, const ExecBuffers& bufs, ExecContext& ctx);

 private:
  void grow(size_t steps);
  std::vector<uint32_t> remaining_;
  std::vector<StepId> ready_;
  std::vector<StepId> inflight_;
  std::unique_ptr<TransportOp[]> ops_;
  size_t ops_capacity_ = 0;
};

}  // namespace weft
