// Binomial-tree broadcast: with v = (rank - root) mod n, rank v receives from v minus its highest
// set bit and then sends to v + 2^k for every 2^k above its highest bit (largest subtree first).
// ceil(log2 n) rounds; slices pipeline through the tree. Data is only copied: all ranks end
// identical.
#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/slicing.h"

namespace weft {

void build_binomial_broadcast(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks(), r = b.rank();
  const uint64_t es = dtype_size(a.dtype);
  if (a.count == 0) return;
  const int v = mod(r - a.root, n);
  if (v == 0 && !a.in_place) b.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, a.count * es);
  if (n == 1) return;
  int high = 0;  // the highest set bit of v (0 for the root)
  while (high * 2 <= v && v > 0) high = high ? high * 2 : 1;
  std::vector<int> kids;
  for (int m = high ? high * 2 : 1; v + m < n; m *= 2) kids.push_back(mod(r + m, n));
  std::reverse(kids.begin(), kids.end());
  const int parent = v ? mod(a.root + (v - high), n) : -1;
  const SlicedRange all(0, a.count, es, slices_for(a.count, es, opt.slice_bytes));
  for (uint64_t j = 0; j < all.slices; ++j) {
    const uint64_t off = all.off(j), bytes = all.bytes(j);
    if (!bytes) continue;
    StepId rv = parent >= 0 ? b.recv(parent, {Buf::kRecv, off}, bytes) : kNoStep;
    Ref src{v == 0 ? Buf::kSend : Buf::kRecv, off};
    for (int kid : kids) b.send(kid, src, bytes, {rv});
  }
}

}  // namespace weft
