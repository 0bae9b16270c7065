#include "runtime/trace/flight_recorder.h"

#include <algorithm>

namespace weft {

const char* trace_state_name(TraceState s) {
  switch (s) {
    case TraceState::kEmpty: return "empty";
    case TraceState::kQueued: return "queued";
    case TraceState::kStarted: return "started";
    case TraceState::kDone: return "done";
    case TraceState::kFailed: return "failed";
  }
  return "?";
}

namespace {
size_t round_up_pow2(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}
}  // namespace

FlightRecorder::FlightRecorder(size_t capacity) : slots_(round_up_pow2(std::max<size_t>(capacity, 1))), mask_(slots_.size() - 1) {}

std::vector<TraceRecord> FlightRecorder::snapshot() const {
  std::vector<TraceRecord> out;
  out.reserve(slots_.size());
  for (const TraceSlot& s : slots_) {
    const uint64_t id = s.id.load(std::memory_order_acquire);
    if (id == 0) continue;
    TraceRecord r;
    r.record = id - 1;
    r.seq = s.seq.load(std::memory_order_relaxed);
    r.count = s.count.load(std::memory_order_relaxed);
    const uint32_t shape = s.shape.load(std::memory_order_relaxed);
    r.kind = static_cast<CollectiveKind>(shape & 0xff);
    r.dtype = static_cast<DataType>((shape >> 8) & 0xff);
    r.op = static_cast<RedOp>((shape >> 16) & 0xff);
    r.root = s.root.load(std::memory_order_relaxed);
    r.state = static_cast<TraceState>(s.state.load(std::memory_order_acquire));
    r.error = s.error.load(std::memory_order_relaxed);
    r.queued_ns = s.queued_ns.load(std::memory_order_relaxed);
    r.started_ns = s.started_ns.load(std::memory_order_relaxed);
    r.finished_ns = s.finished_ns.load(std::memory_order_relaxed);
    r.algorithm = s.algorithm.load(std::memory_order_relaxed);
    r.wait_peer = s.wait.peer.load(std::memory_order_relaxed);
    r.wait_done = s.wait.done.load(std::memory_order_relaxed);
    r.wait_total = s.wait.total.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.id.load(std::memory_order_relaxed) != id) continue;  // rewritten while read
    out.push_back(r);
  }
  std::sort(out.begin(), out.end(), [](const TraceRecord& a, const TraceRecord& b) { return a.record < b.record; });
  return out;
}

uint64_t FlightRecorder::recorded() const {
  uint64_t most = 0;
  for (const TraceSlot& s : slots_) most = std::max(most, s.id.load(std::memory_order_relaxed));
  return most;
}

}  // namespace weft
