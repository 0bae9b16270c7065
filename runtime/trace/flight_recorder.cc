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
    const uint64_t shape = s.shape.load(std::memory_order_relaxed);
    r.kind = static_cast<CollectiveKind>(shape & 0xff);
    r.dtype = static_cast<DataType>((shape >> 8) & 0xff);
    r.op = static_cast<RedOp>((shape >> 16) & 0xff);
    const bool queued = (shape >> 24) & 1;
    r.root = static_cast<int32_t>(static_cast<uint32_t>(shape >> 32));
    const uint64_t status = s.status.load(std::memory_order_acquire);
    r.state = static_cast<TraceState>(status & 0xff);
    r.error = static_cast<int>((status >> 8) & 0xff);
    r.started_ns = s.started_ns.load(std::memory_order_relaxed);
    r.finished_ns = s.finished_ns.load(std::memory_order_relaxed);
    r.queued_ns = queued ? s.queued_ns.load(std::memory_order_relaxed) : r.started_ns;
    r.algorithm = s.algorithm.load(std::memory_order_relaxed);
    if (wait_.record.load(std::memory_order_acquire) == id) {
      r.wait_peer = wait_.peer.load(std::memory_order_relaxed);
      r.wait_done = wait_.done.load(std::memory_order_relaxed);
      r.wait_total = wait_.total.load(std::memory_order_relaxed);
    }
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
