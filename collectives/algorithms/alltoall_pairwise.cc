// Pairwise all-to-all: in round k = 1..n-1 rank r sends block r+k to rank r+k and receives block
// r-k from rank r-k (every round is a perfect matching; all rounds are posted at once and the
// transport overlaps them). The own block is a local copy.
//
// In place (sendbuff == recvbuff), block r-k arrives in round k but is sent only in round n-k:
// it lands in scratch and is copied into place once that send has completed. Scratch: (n-1)
// blocks in place, none otherwise.
//
// With unequal splits (kAllToAllv) the rounds are the same, each message of its own size: exactly
// one message per ordered pair of ranks, a zero-byte one for a zero count, so that a receive of
// the wrong size (a count the two ranks disagree on) is always caught as a mismatch on the first
// message rather than left waiting. Not in place (refused by check_arguments).
#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/slicing.h"
#include "runtime/base/error.h"

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

void build_pairwise_alltoallv(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions&) {
  const int n = b.nranks(), r = b.rank();
  const AllToAllvSplits* s = a.splits.get();
  const auto N = static_cast<size_t>(n);
  if (!s || s->send_counts.size() != N || s->send_displs.size() != N || s->recv_counts.size() != N ||
      s->recv_displs.size() != N)
    fail(ErrorCode::kInvalidArgument, "alltoallv: needs one send and receive count and displacement per rank ({})", n);
  if (a.in_place) fail(ErrorCode::kInvalidArgument, "alltoallv: in place is not supported");
  const uint64_t es = dtype_size(a.dtype);
  // A zero-byte block points at offset 0: its displacement need not lie inside the buffer.
  auto at = [es](uint64_t count, uint64_t displ) { return count ? displ * es : 0; };
  if (s->send_counts[r] != s->recv_counts[r])
    fail(ErrorCode::kInvalidArgument, "alltoallv: sendcounts[{}] = {} but recvcounts[{}] = {} (this rank's own block)", r,
         s->send_counts[r], r, s->recv_counts[r]);
  if (s->send_counts[r])
    b.copy({Buf::kRecv, at(s->recv_counts[r], s->recv_displs[r])}, {Buf::kSend, at(s->send_counts[r], s->send_displs[r])},
           s->send_counts[r] * es);
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n), from = mod(r - k, n);
    b.send(to, {Buf::kSend, at(s->send_counts[to], s->send_displs[to])}, s->send_counts[to] * es);
    b.recv(from, {Buf::kRecv, at(s->recv_counts[from], s->recv_displs[from])}, s->recv_counts[from] * es);
  }
}

}  // namespace weft
