// Pipelined chain broadcast: the root sends slice after slice to the next rank of the chain, which
// forwards each slice as soon as it arrives, and so on to the end. The chain (chain_order) is the
// root, the rest of its node, then each other node in turn, so each node's link carries the buffer
// once whatever the rank numbering; without node ids it is root, root+1, ..., root-1. Time ~ (n-2 + slices) * slice transfers:
// close to one buffer transfer for large messages. Data is only copied: all ranks end identical.
#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/slicing.h"

namespace weft {

void build_chain_broadcast(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks(), r = b.rank();
  const uint64_t es = dtype_size(a.dtype);
  if (a.count == 0) return;
  const std::vector<int> chain = chain_order(opt, n, a.root);  // into each node once
  const int v = position_of(chain, r);                          // position in the chain
  if (v == 0 && !a.in_place) b.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, a.count * es);
  if (n == 1) return;
  const int next = v + 1 < n ? chain[v + 1] : -1, prev = chain[mod(v - 1, n)];
  const SlicedRange all(0, a.count, es, slices_for(a.count, es, opt.slice_bytes));
  for (uint64_t j = 0; j < all.slices; ++j) {
    const uint64_t off = all.off(j), bytes = all.bytes(j);
    if (!bytes) continue;
    if (v == 0) {
      b.send(next, {Buf::kSend, off}, bytes);
      continue;
    }
    StepId rv = b.recv(prev, {Buf::kRecv, off}, bytes);
    if (next >= 0) b.send(next, {Buf::kRecv, off}, bytes, {rv});
  }
}

}  // namespace weft
