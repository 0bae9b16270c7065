// Pipelined ring all-gather: at step s the rank at ring position r (ring_order: the planned ring, else the nodes one after the
// other, by rank within a node) sends the block of position r-s to position r+1 and receives that
// of position r-s-1 from r-1, forwarding each slice as soon as it arrives. The own block goes out straight from the
// send buffer and is copied into place (skipped in place, where it already is). Data is only
// copied, never combined, so every rank ends with identical bits.
#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/slicing.h"

namespace weft {

void build_ring_allgather(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks();
  const uint64_t es = dtype_size(a.dtype), block = a.count * es;
  if (a.count == 0) return;
  if (!a.in_place) b.copy({Buf::kRecv, b.rank() * block}, {Buf::kSend, 0}, block);
  if (n == 1) return;
  // Ring positions: ring_order (the planned ring, else the nodes one after the other); block
  // offsets stay by rank.
  const std::vector<int> order = ring_order(opt, n);
  const int r = position_of(order, b.rank());
  const int next = order[mod(r + 1, n)], prev = order[mod(r - 1, n)];
  const SlicedRange blk(0, a.count, es, slices_for(a.count, es, opt.slice_bytes));
  std::vector<StepId> ready(blk.slices, kNoStep);
  for (int s = 0; s < n - 1; ++s) {
    const uint64_t out_base = order[mod(r - s, n)] * block, in_base = order[mod(r - s - 1, n)] * block;
    for (uint64_t j = 0; j < blk.slices; ++j) {
      const uint64_t off = blk.off(j), bytes = blk.bytes(j);
      if (!bytes) continue;
      Ref src = s == 0 ? Ref{Buf::kSend, off} : Ref{Buf::kRecv, out_base + off};
      b.send(next, src, bytes, {ready[j]});
      ready[j] = b.recv(prev, {Buf::kRecv, in_base + off}, bytes);
    }
  }
}

}  // namespace weft
