// Double binary tree all-reduce (as NCCL builds it, over the ranks in node order: rank_tree). The
// buffer is split in two halves; half t is reduced up tree t to its root and broadcast back down
// the same tree. Both halves are cut into slices that pipeline: a rank forwards slice j up as soon
// as it has combined its own slice j with its children's, and forwards slice j down as soon as it
// arrives.
//
// Determinism: every rank combines slice j as own OP child0 OP child1 (children ascending); the
// root's result is the only one that survives: it is broadcast, so every rank ends with the
// root's bits, and the order of combination does not depend on timing.
//
// Flow control: slices are slice_bytes / topo::kTreeWindowSlices, and a rank's up-send of slice j
// waits until slice j - kTreeWindowSlices has come back down to it (an end-to-end window per tree;
// see topology/trees.h for why).
#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/slicing.h"
#include "collectives/algorithms/tree.h"

namespace weft {

topo::Tree rank_tree(const AlgoOptions& opt, int n, int which) {
  return topo::relabel(topo::double_binary_trees(n).at(which), node_order(opt, n));
}

void build_tree_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks(), r = b.rank();
  const uint64_t es = dtype_size(a.dtype);
  if (a.count == 0) return;
  if (n == 1) {
    if (!a.in_place) b.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, a.count * es);
    return;
  }
  const Buf own = a.in_place ? Buf::kRecv : Buf::kSend;
  const uint64_t kSlots = 4;
  uint64_t scratch = 0;
  for (int t = 0; t < 2; ++t) {
    const topo::Tree tree = rank_tree(opt, n, t);
    const uint64_t first = part_offset(a.count, 2, t), count = part_offset(a.count, 2, t + 1) - first;
    if (count == 0) continue;
    const SlicedRange half(first, count, es,
                           slices_for(count, es, std::max<uint64_t>(opt.slice_bytes / topo::kTreeWindowSlices, es)));
    const int parent = tree.parent[r];
    const std::vector<int>& kids = tree.children[r];
    std::vector<SlotRing> slots;
    for (size_t k = 0; k < kids.size(); ++k) {
      slots.emplace_back(scratch, half.max_bytes(), kSlots);
      scratch = slots.back().end();
    }
    std::vector<StepId> down;  // the receive of each slice from the parent, for the window
    for (uint64_t j = 0; j < half.slices; ++j) {
      const uint64_t off = half.off(j), bytes = half.bytes(j);
      if (!bytes) continue;
      // Up: combine own with the children in ascending order.
      Ref acc{own, off};
      StepId acc_ready = kNoStep;
      for (size_t k = 0; k < kids.size(); ++k) {
        auto slot = slots[k].take();
        StepId rv = b.recv(kids[k], slot.ref, bytes, {slot.last_user});
        acc_ready = k == 0 ? b.reduce3({Buf::kRecv, off}, {own, off}, slot.ref, bytes, {rv})
                           : b.reduce({Buf::kRecv, off}, slot.ref, bytes, {rv, acc_ready});
        acc = {Buf::kRecv, off};
        slots[k].release(slot, acc_ready);
      }
      // Down: the root finishes; everyone else receives the result from its parent.
      StepId done;
      if (parent < 0) {
        done = acc_ready;
        if (a.op == RedOp::kAvg) done = b.avg({Buf::kRecv, off}, bytes, {done});
      } else {
        StepId up = b.send(parent, acc, bytes, {acc_ready});
        if (down.size() >= static_cast<size_t>(topo::kTreeWindowSlices)) b.add_dep(up, down[down.size() - topo::kTreeWindowSlices]);
        done = b.recv(parent, {Buf::kRecv, off}, bytes, {up});
        down.push_back(done);
      }
      for (int kid : kids) b.send(kid, {Buf::kRecv, off}, bytes, {done});
    }
  }
  b.need_scratch(scratch);
}

}  // namespace weft
