// Pipelined chain broadcast: the root sends slice after slice to root+1, which forwards each slice
// to root+2 as soon as it arrives, and so on to root-1. Time ~ (n-2 + slices) * slice transfers:
// close to one buffer transfer for large messages. Data is only copied: all ranks end identical.
#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/slicing.h"

namespace weft {

void build_chain_broadcast(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks(), r = b.rank();
  const uint64_t es = dtype_size(a.dtype);
  if (a.count == 0) return;
  const int v = mod(r - a.root, n);  // position in the chain
  if (v == 0 && !a.in_place) b.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, a.count * es);
  if (n == 1) return;
  const int next = v + 1 < n ? mod(r + 1, n) : -1, prev = mod(r - 1, n);
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
