#include "collectives/schedule.h"

#include <fmt/format.h>

#include "runtime/base/error.h"

namespace weft {

ScheduleBuilder::ScheduleBuilder(int rank, int nranks, DataType dtype, RedOp op)
    : rank_(rank), nranks_(nranks), sent_(nranks, 0), received_(nranks, 0) {
  s_.dtype = dtype;
  s_.op = op;
  s_.nranks = nranks;
}

StepId ScheduleBuilder::add(Step s, std::initializer_list<StepId> deps) {
  StepId id = static_cast<StepId>(s_.steps.size());
  std::vector<StepId> d;
  for (StepId x : deps) {
    if (x == kNoStep) continue;
    if (x >= id) fail(ErrorCode::kInternalError, "schedule: step {} depends on later step {}", id, x);
    d.push_back(x);
  }
  s_.steps.push_back(s);
  step_deps_.push_back(std::move(d));
  return id;
}

StepId ScheduleBuilder::send(int peer, Ref src, uint64_t bytes, std::initializer_list<StepId> deps) {
  Step s{StepKind::kSend};
  s.peer = peer;
  s.src = src;
  s.bytes = bytes;
  s.msg = sent_.at(peer)++;
  return add(s, deps);
}

StepId ScheduleBuilder::recv(int peer, Ref dst, uint64_t bytes, std::initializer_list<StepId> deps) {
  Step s{StepKind::kRecv};
  s.peer = peer;
  s.dst = dst;
  s.bytes = bytes;
  s.msg = received_.at(peer)++;
  return add(s, deps);
}

StepId ScheduleBuilder::reduce(Ref dst, Ref src, uint64_t bytes, std::initializer_list<StepId> deps) {
  Step s{StepKind::kReduce};
  s.dst = dst;
  s.src = src;
  s.bytes = bytes;
  return add(s, deps);
}

StepId ScheduleBuilder::reduce3(Ref dst, Ref a, Ref b, uint64_t bytes, std::initializer_list<StepId> deps) {
  Step s{StepKind::kReduce3};
  s.dst = dst;
  s.src2 = a;
  s.src = b;
  s.bytes = bytes;
  return add(s, deps);
}

StepId ScheduleBuilder::copy(Ref dst, Ref src, uint64_t bytes, std::initializer_list<StepId> deps) {
  Step s{StepKind::kCopy};
  s.dst = dst;
  s.src = src;
  s.bytes = bytes;
  return add(s, deps);
}

StepId ScheduleBuilder::avg(Ref dst, uint64_t bytes, std::initializer_list<StepId> deps) {
  Step s{StepKind::kAvg};
  s.dst = dst;
  s.bytes = bytes;
  return add(s, deps);
}

StepId ScheduleBuilder::convert(StepKind kind, Ref dst, Ref src, uint64_t elems, bool divide,
                                std::initializer_list<StepId> deps) {
  Step s{kind};
  s.divide = divide;
  s.dst = dst;
  s.src = src;
  s.bytes = 2 * elems;
  return add(s, deps);
}

StepId ScheduleBuilder::widen(Ref dst, Ref src, uint64_t elems, std::initializer_list<StepId> deps) {
  return convert(StepKind::kWiden, dst, src, elems, false, deps);
}

StepId ScheduleBuilder::widen_add(Ref dst, Ref src, uint64_t elems, std::initializer_list<StepId> deps) {
  return convert(StepKind::kWidenAdd, dst, src, elems, false, deps);
}

StepId ScheduleBuilder::narrow(Ref dst, Ref src, uint64_t elems, bool divide, std::initializer_list<StepId> deps) {
  return convert(StepKind::kNarrow, dst, src, elems, divide, deps);
}

void ScheduleBuilder::add_dep(StepId step, StepId dep) {
  if (dep == kNoStep) return;
  if (step >= s_.steps.size() || dep >= step) fail(ErrorCode::kInternalError, "schedule: bad dependency {} -> {}", step, dep);
  step_deps_[step].push_back(dep);
}

void ScheduleBuilder::need_scratch(uint64_t bytes) { s_.scratch_bytes = std::max(s_.scratch_bytes, bytes); }

Schedule ScheduleBuilder::finish() {
  s_.deps.clear();
  for (size_t i = 0; i < s_.steps.size(); ++i) {
    s_.steps[i].dep_begin = static_cast<uint32_t>(s_.deps.size());
    s_.steps[i].dep_count = static_cast<uint32_t>(step_deps_[i].size());
    s_.deps.insert(s_.deps.end(), step_deps_[i].begin(), step_deps_[i].end());
  }
  s_.finalize();
  return std::move(s_);
}

void Schedule::finalize() {
  size_t n = steps.size();
  initial_deps.assign(n, 0);
  dependents_begin.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    initial_deps[i] = steps[i].dep_count;
    for (uint32_t k = 0; k < steps[i].dep_count; ++k) dependents_begin[deps[steps[i].dep_begin + k] + 1]++;
  }
  for (size_t i = 0; i < n; ++i) dependents_begin[i + 1] += dependents_begin[i];
  dependents.assign(deps.size(), 0);
  std::vector<uint32_t> fill(dependents_begin.begin(), dependents_begin.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    for (uint32_t k = 0; k < steps[i].dep_count; ++k) dependents[fill[deps[steps[i].dep_begin + k]]++] = static_cast<StepId>(i);
  }
  // Receive-then-reduce pairs: the receive's only dependent is a reduction that depends on it
  // alone and reads its bytes as an operand. Either the reduction writes where the bytes land
  // (then the region ends with the reduced value either way) or the bytes land in scratch,
  // a temporary that nothing else reads.
  fused.assign(n, kNoStep);
  fused_other.assign(n, Ref{});
  auto same = [](const Ref& a, const Ref& b) { return a.buf == b.buf && a.offset == b.offset; };
  for (size_t r = 0; r < n; ++r) {
    const Step& rv = steps[r];
    if (rv.kind != StepKind::kRecv || dependents_begin[r + 1] - dependents_begin[r] != 1) continue;
    StepId d = dependents[dependents_begin[r]];
    const Step& red = steps[d];
    if (red.dep_count != 1 || red.bytes != rv.bytes || !red.bytes) continue;
    if (red.kind == StepKind::kReduce) {
      if (same(red.src, rv.dst) && rv.dst.buf == Buf::kScratch) {  // dst = dst OP incoming
        fused[r] = d;
        fused_other[r] = red.dst;
      } else if (same(red.dst, rv.dst)) {  // dst(=incoming) OP src
        fused[r] = d;
        fused_other[r] = red.src;
      }
    } else if (red.kind == StepKind::kReduce3) {
      if (same(red.src, rv.dst) && (rv.dst.buf == Buf::kScratch || same(red.dst, rv.dst))) {
        fused[r] = d;
        fused_other[r] = red.src2;
      } else if (same(red.src2, rv.dst) && (rv.dst.buf == Buf::kScratch || same(red.dst, rv.dst))) {
        fused[r] = d;
        fused_other[r] = red.src;
      }
    }
  }
}

void Schedule::validate(uint64_t send_bytes, uint64_t recv_bytes) const {
  auto limit = [&](Buf b) { return b == Buf::kSend ? send_bytes : b == Buf::kRecv ? recv_bytes : scratch_bytes; };
  auto check = [&](size_t i, const Ref& r, uint64_t bytes, const char* what) {
    if (r.offset > limit(r.buf) || bytes > limit(r.buf) - r.offset) {
      fail(ErrorCode::kInternalError, "schedule step {}: {} range [{}, {}) outside buffer {} of {} bytes", i, what,
           r.offset, r.offset + bytes, static_cast<int>(r.buf), limit(r.buf));
    }
  };
  size_t es = dtype_size(dtype);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    switch (s.kind) {
      case StepKind::kSend: check(i, s.src, s.bytes, "send"); break;
      case StepKind::kRecv: check(i, s.dst, s.bytes, "recv"); break;
      case StepKind::kCopy: check(i, s.src, s.bytes, "copy src"); check(i, s.dst, s.bytes, "copy dst"); break;
      case StepKind::kReduce3: check(i, s.src2, s.bytes, "reduce src2"); [[fallthrough]];
      case StepKind::kReduce: check(i, s.src, s.bytes, "reduce src"); [[fallthrough]];
      case StepKind::kAvg:
        check(i, s.dst, s.bytes, "reduce dst");
        if (s.bytes % es) fail(ErrorCode::kInternalError, "schedule step {}: {} bytes is not whole elements", i, s.bytes);
        break;
      case StepKind::kWiden: case StepKind::kWidenAdd: case StepKind::kNarrow:
        check(i, s.src, src_bytes(s), "convert src");
        check(i, s.dst, dst_bytes(s), "convert dst");
        if (s.bytes % 2 || dtype_size(wire) != 2)
          fail(ErrorCode::kInternalError, "schedule step {}: a conversion of {} bytes with {}", i, s.bytes, dtype_name(wire));
        break;
    }
    if ((s.kind == StepKind::kSend || s.kind == StepKind::kRecv) && (s.peer < 0 || s.peer >= nranks)) {
      fail(ErrorCode::kInternalError, "schedule step {}: peer {} outside 0..{}", i, s.peer, nranks - 1);
    }
  }
}

std::string Schedule::dump() const {
  static const char* kinds[] = {"send", "recv", "reduce", "reduce3", "copy", "avg", "widen", "widen+", "narrow"};
  static const char* bufs[] = {"S", "R", "T"};
  std::string out;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    out += fmt::format("{:4} {:7} peer={:2} msg={:3} src={}+{} dst={}+{} bytes={} deps=[", i,
                       kinds[static_cast<int>(s.kind)], s.peer, s.msg, bufs[static_cast<int>(s.src.buf)],
                       s.src.offset, bufs[static_cast<int>(s.dst.buf)], s.dst.offset, s.bytes);
    for (uint32_t k = 0; k < s.dep_count; ++k) out += fmt::format("{}{}", k ? "," : "", deps[s.dep_begin + k]);
    out += "]\n";
  }
  return out;
}

}  // namespace weft
