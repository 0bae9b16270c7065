// Pipelined chain reduce: with v = this rank's position in chain_order (the root, the rest of its
// node, then each other node in turn; without node ids v = (rank - root) mod n), slice j travels
// v = n-1 -> n-2 -> ... -> 0 (the root), every rank combining its own contribution as incoming OP own. Non-roots keep the
// partial results in round-robin scratch slots (their receive buffer is not theirs to write);
// the root combines straight into its receive buffer and finishes an average there.
//
// Determinism: every slice is combined in the fixed order (((x_{n-1} OP x_{n-2}) ...) OP x_0)
// (v order) and exists on the root only.
#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/slicing.h"

namespace weft {

void build_chain_reduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks(), r = b.rank();
  const uint64_t es = dtype_size(a.dtype);
  if (a.count == 0) return;
  const std::vector<int> chain = chain_order(opt, n, a.root);  // out of each node once
  const int v = position_of(chain, r);
  if (n == 1) {
    if (!a.in_place) b.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, a.count * es);
    return;
  }
  const int down = chain[mod(v - 1, n)], up = chain[mod(v + 1, n)];  // toward the root, away from it
  const SlicedRange all(0, a.count, es, slices_for(a.count, es, opt.slice_bytes));
  SlotRing slots(0, all.max_bytes(), 4);
  if (v != n - 1) b.need_scratch(slots.end());
  for (uint64_t j = 0; j < all.slices; ++j) {
    const uint64_t off = all.off(j), bytes = all.bytes(j);
    if (!bytes) continue;
    if (v == n - 1) {  // the far end starts the chain
      b.send(down, {Buf::kSend, off}, bytes);
      continue;
    }
    auto slot = slots.take();
    StepId rv = b.recv(up, slot.ref, bytes, {slot.last_user});
    if (v > 0) {
      StepId red = b.reduce(slot.ref, {Buf::kSend, off}, bytes, {rv});
      slots.release(slot, b.send(down, slot.ref, bytes, {red}));
    } else {
      StepId red = b.reduce3({Buf::kRecv, off}, slot.ref, {Buf::kSend, off}, bytes, {rv});
      slots.release(slot, red);
      if (a.op == RedOp::kAvg) b.avg({Buf::kRecv, off}, bytes, {red});
    }
  }
}

}  // namespace weft
