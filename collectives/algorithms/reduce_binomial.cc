// Binomial-tree reduce: with v = (rank - root) mod n, rank v combines its own data with its
// children v + 1, v + 2, v + 4, ... (every power of two below the lowest set bit of v; all of them
// for the root) and sends the result to v minus its lowest set bit. ceil(log2 n) levels; slices
// pipeline through the tree. Non-roots accumulate in scratch; the root in its receive buffer.
//
// Determinism: every rank combines slice j as own OP child(v+1) OP child(v+2) OP ... in that
// order, on every run; the result exists on the root only.
#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/slicing.h"

namespace weft {

void build_binomial_reduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks(), r = b.rank();
  const uint64_t es = dtype_size(a.dtype);
  if (a.count == 0) return;
  const int v = mod(r - a.root, n);
  const int low = v ? (v & -v) : n;  // children are v + m for m < low
  std::vector<int> kids;
  for (int m = 1; m < low && v + m < n; m *= 2) kids.push_back(mod(r + m, n));
  const int parent = v ? mod(r - low, n) : -1;
  if (kids.empty()) {
    if (v == 0 && !a.in_place) b.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, a.count * es);  // n == 1
    if (v == 0) return;
  }
  const SlicedRange all(0, a.count, es, slices_for(a.count, es, opt.slice_bytes));
  const uint64_t kSlots = 4;
  std::vector<SlotRing> kid_slots;
  uint64_t scratch = 0;
  for (size_t k = 0; k <= kids.size(); ++k) {  // one ring per child, then the accumulators
    kid_slots.emplace_back(scratch, all.max_bytes(), kSlots);
    scratch = kid_slots.back().end();
  }
  if (!kids.empty()) b.need_scratch(scratch);
  SlotRing& acc_slots = kid_slots.back();
  for (uint64_t j = 0; j < all.slices; ++j) {
    const uint64_t off = all.off(j), bytes = all.bytes(j);
    if (!bytes) continue;
    if (kids.empty()) {  // a leaf
      b.send(parent, {Buf::kSend, off}, bytes);
      continue;
    }
    SlotRing::Slot acc_slot{};
    Ref acc{Buf::kRecv, off};
    StepId acc_wait = kNoStep;
    if (v != 0) {
      acc_slot = acc_slots.take();
      acc = acc_slot.ref;
      acc_wait = acc_slot.last_user;
    }
    StepId ready = kNoStep;
    for (size_t k = 0; k < kids.size(); ++k) {
      auto slot = kid_slots[k].take();
      StepId rv = b.recv(kids[k], slot.ref, bytes, {slot.last_user});
      ready = k == 0 ? b.reduce3(acc, {Buf::kSend, off}, slot.ref, bytes, {rv, acc_wait})
                     : b.reduce(acc, slot.ref, bytes, {rv, ready});
      kid_slots[k].release(slot, ready);
    }
    if (v != 0) {
      acc_slots.release(acc_slot, b.send(parent, acc, bytes, {ready}));
    } else if (a.op == RedOp::kAvg) {
      b.avg(acc, bytes, {ready});
    }
  }
}

}  // namespace weft
