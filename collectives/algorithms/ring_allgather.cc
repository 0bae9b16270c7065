// Pipelined ring all-gather: at step s rank r sends block r-s to r+1 and receives block r-s-1
// from r-1, forwarding each slice as soon as it arrives. The own block goes out straight from the
// send buffer and is copied into place (skipped in place, where it already is). Data is only
// copied, never combined, so every rank ends with identical bits.
#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/slicing.h"

namespace weft {

void build_ring_allgather(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks(), r = b.rank();
  const uint64_t es = dtype_size(a.dtype), block = a.count * es;
  if (a.count == 0) return;
  if (!a.in_place) b.copy({Buf::kRecv, r * block}, {Buf::kSend, 0}, block);
  if (n == 1) return;
  const int next = mod(r + 1, n), prev = mod(r - 1, n);
  const SlicedRange blk(0, a.count, es, slices_for(a.count, es, opt.slice_bytes));
  std::vector<StepId> ready(blk.slices, kNoStep);
  for (int s = 0; s < n - 1; ++s) {
    const uint64_t out_base = mod(r - s, n) * block, in_base = mod(r - s - 1, n) * block;
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
