// Pairwise all-to-all: in round k = 1..n-1 rank r sends block r+k to rank r+k and receives block
// r-k from rank r-k (every round is a perfect matching; all rounds are posted at once and the
// transport overlaps them). The own block is a local copy.
//
// In place (sendbuff == recvbuff), block r-k arrives in round k but is sent only in round n-k:
// it lands in scratch and is copied into place once that send has completed. Scratch: (n-1)
// blocks in place, none otherwise.
#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/slicing.h"

namespace weft {

void build_pairwise_alltoall(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions&) {
  const int n = b.nranks(), r = b.rank();
  const uint64_t block = a.count * dtype_size(a.dtype);
  if (a.count == 0) return;
  if (!a.in_place) b.copy({Buf::kRecv, r * block}, {Buf::kSend, r * block}, block);
  if (n == 1) return;
  if (a.in_place) b.need_scratch((n - 1) * block);
  std::vector<StepId> sent(n, kNoStep), arrived(n, kNoStep);
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n), from = mod(r - k, n);
    sent[to] = b.send(to, {a.in_place ? Buf::kRecv : Buf::kSend, to * block}, block);
    Ref dst = a.in_place ? Ref{Buf::kScratch, (k - 1) * block} : Ref{Buf::kRecv, from * block};
    arrived[from] = b.recv(from, dst, block);
  }
  if (!a.in_place) return;
  for (int k = 1; k < n; ++k) {
    const int from = mod(r - k, n);
    b.copy({Buf::kRecv, from * block}, {Buf::kScratch, (k - 1) * block}, block, {arrived[from], sent[from]});
  }
}

}  // namespace weft
