// Pipelined ring reduce-scatter: block c (the count elements rank c receives) starts at the ring
// position after c's and travels around to c (positions: ring_order), every rank combining its own contribution on the way; the
// blocks travel concurrently (at step s rank r forwards block r-1-s). Blocks are cut into slices
// that pipeline. Partial results live in two scratch banks (2 * count elements), so neither the send buffer nor
// (until the last step) the receive buffer is written: in place (recvbuff = sendbuff + r*count)
// the own block is read only by the last combination, which writes it.
//
// Determinism: block c is combined in the fixed order ((x_{c+1} OP x_{c+2}) OP ...) OP x_c by
// the same ranks on every run; it exists on one rank only.
#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/slicing.h"

namespace weft {

void build_ring_reducescatter(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks();
  const uint64_t es = dtype_size(a.dtype), block = a.count * es;
  if (a.count == 0) return;
  if (n == 1) {
    b.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, block);
    return;
  }
  // Ring positions: ring_order (the planned ring, else the nodes one after the other); block
  // offsets stay by rank.
  const std::vector<int> order = ring_order(opt, n);
  const int r = position_of(order, b.rank());
  const int next = order[mod(r + 1, n)], prev = order[mod(r - 1, n)];
  const SlicedRange blk(0, a.count, es, slices_for(a.count, es, opt.slice_bytes));
  // Partial results alternate between two scratch banks: step s receives into bank s%2 and
  // forwards from it at step s+1, while step s+1 receives into the other bank. A receive into a
  // bank waits for the send that last read the same slice of it.
  b.need_scratch(2 * block);
  std::vector<StepId> ready(blk.slices, kNoStep), bank_reader[2];
  bank_reader[0].assign(blk.slices, kNoStep);
  bank_reader[1].assign(blk.slices, kNoStep);
  for (int s = 0; s < n - 1; ++s) {
    const uint64_t out_base = order[mod(r - 1 - s, n)] * block, in_base = order[mod(r - 2 - s, n)] * block;
    const uint64_t in_bank = (s % 2) * block, out_bank = ((s + 1) % 2) * block;
    for (uint64_t j = 0; j < blk.slices; ++j) {
      const uint64_t off = blk.off(j), bytes = blk.bytes(j);
      if (!bytes) continue;
      if (s == 0) {
        b.send(next, {Buf::kSend, out_base + off}, bytes);
      } else {
        bank_reader[(s + 1) % 2][j] = b.send(next, {Buf::kScratch, out_bank + off}, bytes, {ready[j]});
      }
      Ref tmp{Buf::kScratch, in_bank + off};
      StepId rv = b.recv(prev, tmp, bytes, {bank_reader[s % 2][j]});
      if (s < n - 2) {
        ready[j] = b.reduce(tmp, {Buf::kSend, in_base + off}, bytes, {rv});
      } else {
        StepId red = b.reduce3({Buf::kRecv, off}, tmp, {Buf::kSend, in_base + off}, bytes, {rv});
        if (a.op == RedOp::kAvg) b.avg({Buf::kRecv, off}, bytes, {red});
      }
    }
  }
}

}  // namespace weft
