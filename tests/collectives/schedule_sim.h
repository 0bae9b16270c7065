// A transport-free simulator that runs the schedules of every rank of a world together, to test
// algorithms as schedules: the k-th send a->b meets the k-th receive at b from a (rendezvous: the
// sender's bytes are read only when both are posted, so a premature overwrite shows in the data),
// steps start only when their dependencies are done, and the next action is drawn at random from
// everything that could happen (a seed), so many interleavings are tried. It reports deadlocks,
// size mismatches, scratch overruns (guarded), and hazards: a step that writes bytes that an
// in-flight send still has to read or a receive may still write, or reads bytes a receive may
// still write.
#pragma once
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "collectives/convert_kernels.h"
#include "collectives/reduce_kernels.h"
#include "collectives/schedule.h"

namespace weft::test {

struct SimRank {
  const void* send = nullptr;
  void* recv = nullptr;
};

// Returns "" on success, else what went wrong.
inline std::string simulate(const std::vector<Schedule>& sched, const std::vector<SimRank>& bufs, uint64_t seed) {
  const int n = static_cast<int>(sched.size());
  constexpr size_t kGuard = 64;
  std::vector<std::vector<uint8_t>> scratch(n);
  for (int r = 0; r < n; ++r) scratch[r].assign(sched[r].scratch_bytes + 2 * kGuard, 0x5A);
  auto addr = [&](int r, const Ref& ref) -> uint8_t* {
    switch (ref.buf) {
      case Buf::kSend: return const_cast<uint8_t*>(static_cast<const uint8_t*>(bufs[r].send)) + ref.offset;
      case Buf::kRecv: return static_cast<uint8_t*>(bufs[r].recv) + ref.offset;
      default: return scratch[r].data() + kGuard + ref.offset;
    }
  };
  struct Range { const uint8_t* lo; const uint8_t* hi; bool write; StepId step; };
  std::vector<std::vector<Range>> inflight(n);
  auto overlaps = [](const Range& a, const uint8_t* lo, const uint8_t* hi) { return lo < a.hi && a.lo < hi; };
  // Checks an access of [p, p+bytes) by step `who` of rank r against rank r's in-flight transfers.
  auto hazard = [&](int r, StepId who, const uint8_t* p, uint64_t bytes, bool write) -> std::string {
    if (!bytes) return {};
    for (const Range& x : inflight[r]) {
      if (x.step == who || !overlaps(x, p, p + bytes)) continue;
      if (write || x.write)
        return fmt::format("rank {}: step {} {} bytes that in-flight {} step {} {}", r, who, write ? "writes" : "reads",
                           x.write ? "receive" : "send", x.step, x.write ? "may still write" : "still has to read");
    }
    return {};
  };
  std::vector<std::vector<uint32_t>> remaining(n);
  std::vector<std::pair<int, StepId>> ready;  // (rank, step) ready to start
  size_t total = 0, done = 0;
  for (int r = 0; r < n; ++r) {
    remaining[r] = sched[r].initial_deps;
    total += sched[r].steps.size();
    for (StepId i = 0; i < sched[r].steps.size(); ++i)
      if (remaining[r][i] == 0) ready.push_back({r, i});
  }
  // Posted, unmatched transfers keyed by (src, dst, msg).
  std::map<std::tuple<int, int, uint32_t>, StepId> sends, recvs;
  std::vector<std::tuple<int, int, uint32_t>> matchable;
  auto complete = [&](int r, StepId id) {
    ++done;
    const Schedule& s = sched[r];
    for (uint32_t k = s.dependents_begin[id]; k < s.dependents_begin[id + 1]; ++k)
      if (--remaining[r][s.dependents[k]] == 0) ready.push_back({r, s.dependents[k]});
  };
  auto drop_inflight = [&](int r, StepId id) {
    auto& v = inflight[r];
    for (size_t k = 0; k < v.size(); ++k)
      if (v[k].step == id) { v[k] = v.back(); v.pop_back(); return; }
  };
  std::mt19937_64 rng(seed);
  while (done < total) {
    size_t options = ready.size() + matchable.size();
    if (options == 0) {
      std::string what;
      for (auto& [key, id] : recvs)
        if (what.size() < 300) what += fmt::format(" rank {} step {} waits for message {} from rank {};", std::get<1>(key), id, std::get<2>(key), std::get<0>(key));
      for (auto& [key, id] : sends)
        if (what.size() < 600) what += fmt::format(" rank {} step {} sends message {} to rank {} nobody receives;", std::get<0>(key), id, std::get<2>(key), std::get<1>(key));
      return fmt::format("deadlock after {} of {} steps:{}", done, total, what);
    }
    size_t pick = rng() % options;
    if (pick >= ready.size()) {  // deliver a matched message
      size_t m = pick - ready.size();
      auto key = matchable[m];
      matchable[m] = matchable.back();
      matchable.pop_back();
      auto [src, dst, msg] = key;
      StepId sid = sends.at(key), rid = recvs.at(key);
      sends.erase(key);
      recvs.erase(key);
      const Step& ss = sched[src].steps[sid];
      const Step& rs = sched[dst].steps[rid];
      if (ss.bytes != rs.bytes)
        return fmt::format("message {} from rank {} to rank {}: {} bytes sent, {} expected", msg, src, dst, ss.bytes, rs.bytes);
      if (ss.bytes) std::memmove(addr(dst, rs.dst), addr(src, ss.src), ss.bytes);
      drop_inflight(src, sid);
      drop_inflight(dst, rid);
      complete(src, sid);
      complete(dst, rid);
      continue;
    }
    auto [r, id] = ready[pick];
    ready[pick] = ready.back();
    ready.pop_back();
    const Step& st = sched[r].steps[id];
    const uint64_t es = dtype_size(sched[r].dtype);
    std::string h;
    switch (st.kind) {
      case StepKind::kSend: case StepKind::kRecv: {
        bool is_send = st.kind == StepKind::kSend;
        uint8_t* p = addr(r, is_send ? st.src : st.dst);
        if (!(h = hazard(r, id, p, st.bytes, !is_send)).empty()) return h;
        inflight[r].push_back({p, p + st.bytes, !is_send, id});
        auto key = is_send ? std::make_tuple(r, st.peer, st.msg) : std::make_tuple(st.peer, r, st.msg);
        auto& mine = is_send ? sends : recvs;
        auto& other = is_send ? recvs : sends;
        if (!mine.emplace(key, id).second) return fmt::format("rank {}: message {} posted twice", r, st.msg);
        if (other.count(key)) matchable.push_back(key);
        break;
      }
      case StepKind::kReduce: case StepKind::kReduce3: case StepKind::kCopy: case StepKind::kAvg: {
        uint8_t* d = addr(r, st.dst);
        if (st.kind != StepKind::kAvg && !(h = hazard(r, id, addr(r, st.src), st.bytes, false)).empty()) return h;
        if (st.kind == StepKind::kReduce3 && !(h = hazard(r, id, addr(r, st.src2), st.bytes, false)).empty()) return h;
        if (!(h = hazard(r, id, d, st.bytes, true)).empty()) return h;
        if (st.kind == StepKind::kReduce) reduce_inplace(sched[r].dtype, sched[r].op, d, addr(r, st.src), st.bytes / es);
        if (st.kind == StepKind::kReduce3)
          reduce_into(sched[r].dtype, sched[r].op, d, addr(r, st.src2), addr(r, st.src), st.bytes / es);
        if (st.kind == StepKind::kCopy && st.bytes && d != addr(r, st.src)) std::memmove(d, addr(r, st.src), st.bytes);
        if (st.kind == StepKind::kAvg) finish_avg(sched[r].dtype, d, st.bytes / es, sched[r].nranks);
        complete(r, id);
        break;
      }
      case StepKind::kWiden: case StepKind::kWidenAdd: case StepKind::kNarrow: {
        uint8_t* d = addr(r, st.dst);
        const uint8_t* src = addr(r, st.src);
        if (!(h = hazard(r, id, src, src_bytes(st), false)).empty()) return h;
        if (!(h = hazard(r, id, d, dst_bytes(st), true)).empty()) return h;
        const DataType w = sched[r].wire;
        if (st.kind == StepKind::kWiden) widen_to_f32(w, reinterpret_cast<float*>(d), src, st.bytes / 2);
        if (st.kind == StepKind::kWidenAdd) widen_add_f32(w, reinterpret_cast<float*>(d), src, st.bytes / 2);
        if (st.kind == StepKind::kNarrow)
          narrow_from_f32(w, d, reinterpret_cast<const float*>(src), st.bytes / 2, st.divide ? sched[r].nranks : 1);
        complete(r, id);
        break;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    auto& v = scratch[r];
    for (size_t k = 0; k < kGuard; ++k)
      if (v[k] != 0x5A || v[v.size() - 1 - k] != 0x5A) return fmt::format("rank {}: scratch guard overwritten", r);
  }
  return {};
}

}  // namespace weft::test
