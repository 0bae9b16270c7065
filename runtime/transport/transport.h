// The transport interface: all that collectives (through the executor) see of how bytes move.
// Non-blocking tagged sends and receives of byte ranges between the ranks of one communicator.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "collectives/datatype.h"
#include "runtime/base/error.h"

namespace weft {

// Tags carry 48 bits chosen by the caller; the transport adds the source rank itself.
inline constexpr uint64_t kTagBits = 48;
inline constexpr uint64_t kTagMask = (uint64_t{1} << kTagBits) - 1;

// One posted send or receive. Owned by the caller, who must keep it alive (and not move it)
// until it leaves kPending. The transport writes the result fields before publishing state.
struct TransportOp {
  enum State : int { kIdle = 0, kPending = 1, kDone = 2, kFailed = 3 };
  std::atomic<int> state{kIdle};
  size_t bytes = 0;         // receives: the bytes that arrived
  uint64_t sender_tag = 0;  // receives: the sender's full 48-bit tag
  ErrorCode error = ErrorCode::kSuccess;
  std::string error_message;
  void* impl = nullptr;  // the transport's own handle
  int peer = -1;

  bool pending() const { return state.load(std::memory_order_acquire) == kPending; }
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* name() const = 0;

  // Sends len bytes of buf to peer under tag. buf must stay valid until op leaves kPending.
  virtual void post_send(int peer, uint64_t tag, const void* buf, size_t len, TransportOp* op) = 0;
  // Receives at most len bytes from peer whose tag matches (tag & mask) == (expected & mask).
  // A longer message fails the receive (truncation).
  virtual void post_recv(int peer, uint64_t tag, uint64_t mask, void* buf, size_t len, TransportOp* op) = 0;
  // Transports that can combine a message with local data as it arrives (the shared-memory one
  // reduces straight out of its staging buffer) say so; the executor then posts receive-reduce
  // pairs as one operation: dst = incoming OP other (other may equal dst).
  virtual bool reduces_on_delivery() const { return false; }
  virtual void post_recv_reduce(int /*peer*/, uint64_t /*tag*/, uint64_t /*mask*/, void* /*dst*/, const void* /*other*/,
                                size_t /*len*/, DataType /*dtype*/, RedOp /*op*/, TransportOp* /*op*/) {
    throw Error(ErrorCode::kInternalError, "this transport does not reduce on delivery");
  }
  // Whether a message from peer whose tag matches (tag & mask) has arrived and waits for its
  // receive (a receive from any source asks each peer in turn). It is not taken.
  virtual bool probe(int /*peer*/, uint64_t /*tag*/, uint64_t /*mask*/) {
    throw Error(ErrorCode::kInvalidUsage, std::string("receive from any source: the ") + name() + " transport cannot probe");
  }
  // Drives communication; returns true when something completed or moved.
  virtual bool progress() = 0;
  // Sleeps until the transport may have something to progress, interrupt() is called, or the
  // deadline passes. May return early spuriously.
  virtual void wait_for_event(std::chrono::steady_clock::time_point deadline) = 0;
  // Wakes a thread in wait_for_event (any thread may call this).
  virtual void interrupt() = 0;
  // Gives up on every pending op: each leaves kPending (as kFailed) before this returns, and the
  // transport never touches their buffers again. The transport is unusable afterwards.
  virtual void shutdown(const std::string& why) = 0;
  // Non-empty when peer is known to have failed (e.g. its connection broke).
  virtual std::string peer_failure(int peer) const = 0;
};

}  // namespace weft
