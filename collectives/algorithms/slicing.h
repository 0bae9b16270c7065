// Helpers shared by the algorithm files: cutting element ranges into slices, and round-robin
// scratch slots with their write-after-read dependencies.
#pragma once
#include <algorithm>
#include <vector>

#include "collectives/collective.h"
#include "runtime/base/error.h"

namespace weft {

// A contiguous element range cut into `slices` parts whose sizes differ by at most one.
struct SlicedRange {
  uint64_t first_el = 0, count = 0, es = 1, slices = 1;
  SlicedRange() = default;
  SlicedRange(uint64_t first, uint64_t n, uint64_t elsize, uint64_t nslices)
      : first_el(first), count(n), es(elsize), slices(std::max<uint64_t>(1, nslices)) {}
  uint64_t off(uint64_t j) const { return (first_el + part_offset(count, slices, j)) * es; }
  uint64_t bytes(uint64_t j) const { return (part_offset(count, slices, j + 1) - part_offset(count, slices, j)) * es; }
  uint64_t max_bytes() const { return (count + slices - 1) / slices * es; }
};

// Slices needed so that no slice of `count` elements exceeds slice_bytes.
inline uint64_t slices_for(uint64_t count, uint64_t es, uint64_t slice_bytes) {
  uint64_t bytes = count * es;
  slice_bytes = std::max<uint64_t>(slice_bytes, es);
  return std::max<uint64_t>(1, (bytes + slice_bytes - 1) / slice_bytes);
}

// The steps that last wrote (or read) byte ranges of a buffer (non-overlapping ranges): a later
// step over [off, off+bytes) depends on every one whose range overlaps it.
class RangeWriters {
 public:
  void add(uint64_t off, uint64_t bytes, StepId step) {
    if (bytes) entries_.push_back({off, off + bytes, step});
    sorted_ = false;
  }
  void merge(const RangeWriters& o) {
    entries_.insert(entries_.end(), o.entries_.begin(), o.entries_.end());
    sorted_ = false;
  }
  // Makes `step` wait for the writers of [off, off+bytes).
  void gate(ScheduleBuilder& b, StepId step, uint64_t off, uint64_t bytes) {
    if (!sorted_) {
      std::sort(entries_.begin(), entries_.end(), [](const Entry& x, const Entry& y) { return x.begin < y.begin; });
      sorted_ = true;
    }
    auto it = std::upper_bound(entries_.begin(), entries_.end(), off, [](uint64_t o, const Entry& e) { return o < e.end; });
    for (; it != entries_.end() && it->begin < off + bytes; ++it) b.add_dep(step, it->step);
  }

 private:
  struct Entry {
    uint64_t begin, end;
    StepId step;
  };
  std::vector<Entry> entries_;
  bool sorted_ = true;
};

// `n` scratch slots of `bytes` each starting at `base`, handed out round-robin. take() returns
// the slot and the step that last used it (the next writer must wait for it); release() records
// the step after which the slot is free again.
class SlotRing {
 public:
  SlotRing(uint64_t base, uint64_t bytes, uint64_t n) : base_(base), bytes_(bytes), user_(n, kNoStep) {}
  uint64_t end() const { return base_ + bytes_ * user_.size(); }
  struct Slot {
    uint64_t index;
    Ref ref;
    StepId last_user;
  };
  Slot take() {
    uint64_t i = next_++ % user_.size();
    return {i, Ref{Buf::kScratch, base_ + i * bytes_}, user_[i]};
  }
  void release(const Slot& s, StepId user) { user_[s.index] = user; }

 private:
  uint64_t base_, bytes_, next_ = 0;
  std::vector<StepId> user_;
};

inline int mod(int a, int n) { return ((a % n) + n) % n; }

// The all-reduce cases every algorithm handles alike: nothing to do for no elements, a copy (out of
// place) for one rank. True when it built the whole schedule.
inline bool trivial_allreduce(ScheduleBuilder& b, const CollectiveArgs& a) {
  if (a.count == 0) return true;
  if (b.nranks() > 1) return false;
  if (!a.in_place) b.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, a.count * dtype_size(a.dtype));
  return true;
}

// The order in which rings and chains visit the ranks: by node (opt.node_of_rank), then by rank,
// so that a ring crosses between nodes once per node however the launcher numbered the ranks
// (round-robin placement, mpirun --map-by node, would otherwise cross at every hop). The identity
// when the node of every rank is not known. order[position] = rank; position_of(order, rank).
inline std::vector<int> node_order(const AlgoOptions& opt, int n) {
  std::vector<int> order(n);
  for (int r = 0; r < n; ++r) order[r] = r;
  if (static_cast<int>(opt.node_of_rank.size()) == n)
    std::stable_sort(order.begin(), order.end(),
                     [&](int x, int y) { return opt.node_of_rank[x] < opt.node_of_rank[y]; });
  return order;
}
inline int position_of(const std::vector<int>& order, int rank) {
  return static_cast<int>(std::find(order.begin(), order.end(), rank) - order.begin());
}
// The ring that the ring schedules (all-reduce, reduce-scatter, all-gather) run: opt.ring, the
// planner's ring (planned_ring, collectives/planner.h), where given; else node_order. A given ring
// must be a permutation of the n ranks (kInvalidArgument otherwise, naming what is wrong).
inline std::vector<int> ring_order(const AlgoOptions& opt, int n) {
  if (opt.ring.empty()) return node_order(opt, n);
  if (static_cast<int>(opt.ring.size()) != n)
    fail(ErrorCode::kInvalidArgument, "ring order: {} positions for {} ranks", opt.ring.size(), n);
  std::vector<char> seen(n, 0);
  for (int r : opt.ring) {
    if (r < 0 || r >= n) fail(ErrorCode::kInvalidArgument, "ring order: rank {} is not in 0..{}", r, n - 1);
    if (seen[r]++) fail(ErrorCode::kInvalidArgument, "ring order: rank {} appears twice", r);
  }
  return opt.ring;
}
// A chain from `root`: the root, the other ranks of its node, then the other nodes one after the
// other (node_order from the root on), so that the chain crosses into each node once. Without
// node ids: root, root+1, ..., root-1.
inline std::vector<int> chain_order(const AlgoOptions& opt, int n, int root) {
  const std::vector<int> order = node_order(opt, n);
  auto node = [&](int r) { return static_cast<int>(opt.node_of_rank.size()) == n ? opt.node_of_rank[r] : 0; };
  const int q = position_of(order, root);
  std::vector<int> out;
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < n; ++i) {
      const int r = order[mod(q + i, n)];
      if ((node(r) == node(root)) == (pass == 0)) out.push_back(r);
    }
  return out;
}

}  // namespace weft
