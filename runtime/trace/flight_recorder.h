// FlightRecorder: a communicator's ring buffer of its last operations (WEFT_TRACE_BUFFER slots),
// written on the hot path with a few relaxed stores into a preallocated slot (no allocation, no
// lock, no clock read of its own: it takes the times the call reads anyway) and read, from another
// thread, only when a dump is written (runtime/trace/trace_registry.h). docs/OBSERVABILITY.md.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/collective.h"
#include "runtime/base/wait_note.h"
#include "runtime/trace/observer.h"

namespace weft {

enum class TraceState : uint32_t { kEmpty = 0, kQueued = 1, kStarted = 2, kDone = 3, kFailed = 4 };
const char* trace_state_name(TraceState s);

// One operation. Every field is an atomic, so that a dump may read a slot while it is written;
// `id` (record number + 1, 0 while a slot is rewritten) tells the reader whether it read one
// operation's fields. Every call writes only the first cache line (and the line of the next slot
// is prefetched for writing when a call ends); the second is written for queued calls only.
struct alignas(64) TraceSlot {
  std::atomic<uint64_t> id{0};
  std::atomic<uint64_t> seq{0};
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> shape{0};   // kind | dtype << 8 | op << 16 | queued << 24 | uint32 root << 32
  std::atomic<uint64_t> status{0};  // TraceState | ErrorCode << 8
  std::atomic<int64_t> started_ns{0}, finished_ns{0};  // steady clock
  std::atomic<const char*> algorithm{nullptr};  // a static string: an algorithm table id, "direct", ...
  std::atomic<int64_t> queued_ns{0};            // second line: calls queued for the progress thread
};

// A consistent copy of one slot, for the dump.
struct TraceRecord {
  uint64_t record = 0, seq = 0, count = 0;
  CollectiveKind kind = CollectiveKind::kAllReduce;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = 0;
  TraceState state = TraceState::kEmpty;
  int error = 0;
  int64_t queued_ns = 0, started_ns = 0, finished_ns = 0;
  const char* algorithm = nullptr;
  int wait_peer = -1;
  uint32_t wait_done = 0, wait_total = 0;
};

class FlightRecorder final : public CallObserver {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  explicit FlightRecorder(size_t capacity);
  size_t capacity() const { return slots_.size(); }

  // Operation `record` (numbered by the OperationQueue, in submission order) was queued for the
  // progress thread at t.
  void queued(uint64_t record, uint64_t seq, const CollectiveArgs& a, TimePoint t) {
    TraceSlot& s = slot(record);
    fill(s, record, seq, a, TraceState::kQueued, 0, true, t.time_since_epoch().count());
  }
  // It started at t0: after queued(), or at once (an inline blocking call: no read of the slot).
  void started(uint64_t record, uint64_t seq, const CollectiveArgs& a, TimePoint t0, bool was_queued) {
    TraceSlot& s = slot(record);
    const int64_t t = t0.time_since_epoch().count();
    if (was_queued) {
      s.started_ns.store(t, std::memory_order_relaxed);
      s.status.store(static_cast<uint64_t>(TraceState::kStarted), std::memory_order_release);
      return;
    }
    fill(s, record, seq, a, TraceState::kStarted, t, false, 0);
  }
  // Where a call that starts untimed (left zero by started()) stores its start once it first waits.
  std::atomic<int64_t>* start_field(uint64_t record) { return &slot(record).started_ns; }
  void algorithm(uint64_t record, const char* id) { slot(record).algorithm.store(id, std::memory_order_relaxed); }
  // Where the running operation `record` notes whom it waits for (one note per communicator: its
  // operations run one at a time).
  WaitNote* wait_note(uint64_t record) {
    wait_.begin(record);
    return &wait_;
  }
  void call_ended(const CallEnd& e) override { finished(e.record, e.t1, 0); }
  void finished(uint64_t record, TimePoint t, int error) {
    TraceSlot& s = slot(record);
    s.finished_ns.store(t.time_since_epoch().count(), std::memory_order_relaxed);
    s.status.store(static_cast<uint64_t>(error ? TraceState::kFailed : TraceState::kDone) | static_cast<uint64_t>(error) << 8,
                   std::memory_order_release);
    __builtin_prefetch(&slot(record + 1), 1, 3);  // the next call's line, while the caller computes
  }

  // The operations recorded, oldest first (at most capacity()); slots being rewritten are left out.
  std::vector<TraceRecord> snapshot() const;
  uint64_t recorded() const;  // operations recorded so far (including those overwritten)

 private:
  TraceSlot& slot(uint64_t record) { return slots_[record & mask_]; }
  static void fill(TraceSlot& s, uint64_t record, uint64_t seq, const CollectiveArgs& a, TraceState st, int64_t started,
                   bool queued, int64_t queued_ns) {
    s.id.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.seq.store(seq, std::memory_order_relaxed);
    s.count.store(a.count, std::memory_order_relaxed);
    s.shape.store(static_cast<uint64_t>(a.kind) | static_cast<uint64_t>(a.dtype) << 8 | static_cast<uint64_t>(a.op) << 16 |
                      static_cast<uint64_t>(queued) << 24 | static_cast<uint64_t>(static_cast<uint32_t>(a.root)) << 32,
                  std::memory_order_relaxed);
    s.status.store(static_cast<uint64_t>(st), std::memory_order_relaxed);
    s.started_ns.store(started, std::memory_order_relaxed);
    s.finished_ns.store(0, std::memory_order_relaxed);
    s.algorithm.store(nullptr, std::memory_order_relaxed);
    if (queued) s.queued_ns.store(queued_ns, std::memory_order_relaxed);
    s.id.store(record + 1, std::memory_order_release);
  }

  std::vector<TraceSlot> slots_;
  uint64_t mask_;
  WaitNote wait_;
};

}  // namespace weft
