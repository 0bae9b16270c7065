#include "runtime/comm/arguments.h"

#include <algorithm>

#include "runtime/base/error.h"

namespace weft {

namespace {

// kAllToAllv: one count and displacement per rank on each side, none past the addressable size,
// this rank's own block the same size on both sides, and no two receive blocks overlapping (two
// peers' messages would land on the same bytes). That sendcounts[p] here equals recvcounts[r] on
// rank p cannot be seen here: a disagreement is caught on its message (Execution::mismatch).
void check_splits(const CollectiveArgs& a, int rank, int size, uint64_t limit) {
  const AllToAllvSplits* s = a.splits.get();
  const auto n = static_cast<size_t>(size);
  if (!s) fail(ErrorCode::kInvalidArgument, "alltoallv: no counts and displacements");
  const std::pair<const std::vector<uint64_t>*, const char*> arrays[] = {
      {&s->send_counts, "sendcounts"}, {&s->send_displs, "sdispls"}, {&s->recv_counts, "recvcounts"}, {&s->recv_displs, "rdispls"}};
  for (const auto& [v, name] : arrays)
    if (v->size() != n) fail(ErrorCode::kInvalidArgument, "alltoallv: {} has {} entries for {} ranks", name, v->size(), size);
  for (size_t p = 0; p < n; ++p) {
    for (int side = 0; side < 2; ++side) {
      const uint64_t c = side ? s->recv_counts[p] : s->send_counts[p], d = side ? s->recv_displs[p] : s->send_displs[p];
      if (c > limit || d > limit - c)
        fail(ErrorCode::kInvalidArgument, "alltoallv: {}[{}] = {} with {}[{}] = {} elements of {} overflows the addressable size",
             side ? "rdispls" : "sdispls", p, d, side ? "recvcounts" : "sendcounts", p, c, dtype_name(a.dtype));
    }
  }
  const auto r = static_cast<size_t>(rank);
  if (s->send_counts[r] != s->recv_counts[r])
    fail(ErrorCode::kInvalidArgument,
         "alltoallv: sendcounts[{}] = {} but recvcounts[{}] = {}: this rank's block to itself must be the same size on both sides",
         r, s->send_counts[r], r, s->recv_counts[r]);
  std::vector<size_t> order;
  for (size_t p = 0; p < n; ++p)
    if (s->recv_counts[p]) order.push_back(p);
  std::sort(order.begin(), order.end(), [s](size_t x, size_t y) { return s->recv_displs[x] < s->recv_displs[y]; });
  for (size_t i = 1; i < order.size(); ++i) {
    const size_t p = order[i - 1], q = order[i];
    if (s->recv_displs[p] + s->recv_counts[p] > s->recv_displs[q])
      fail(ErrorCode::kInvalidArgument,
           "alltoallv: the receive blocks from rank {} (rdispls {}, recvcounts {}) and rank {} (rdispls {}, recvcounts {}) overlap",
           p, s->recv_displs[p], s->recv_counts[p], q, s->recv_displs[q], s->recv_counts[q]);
  }
}

}  // namespace

CollectiveArgs with_in_place(const CollectiveArgs& args_in, const void* send, const void* recv, int rank) {
  CollectiveArgs args = args_in;
  const uint64_t es = dtype_valid(static_cast<int>(args.dtype)) ? dtype_size(args.dtype) : 1;
  auto s0 = reinterpret_cast<uintptr_t>(send), r0 = reinterpret_cast<uintptr_t>(recv);
  switch (args.kind) {
    case CollectiveKind::kReduceScatter: args.in_place = send && r0 == s0 + rank * args.count * es; break;
    case CollectiveKind::kAllGather: args.in_place = send && s0 == r0 + rank * args.count * es; break;
    case CollectiveKind::kAllReduce: case CollectiveKind::kBroadcast: case CollectiveKind::kReduce:
    case CollectiveKind::kAllToAll: args.in_place = send && send == recv; break;
    default: args.in_place = false;
  }
  return args;
}

void check_arguments(const CollectiveArgs& a, const void* send, const void* recv, int rank_, int size_) {
  using K = CollectiveKind;
  if (!dtype_valid(static_cast<int>(a.dtype))) {
    fail(ErrorCode::kInvalidArgument, "{}: invalid data type {}", collective_name(a.kind), static_cast<int>(a.dtype));
  }
  bool reducing = a.kind == K::kAllReduce || a.kind == K::kReduceScatter || a.kind == K::kReduce;
  if (reducing && !redop_valid(static_cast<int>(a.op))) {
    fail(ErrorCode::kInvalidArgument, "{}: invalid reduction op {}", collective_name(a.kind), static_cast<int>(a.op));
  }
  uint64_t es = dtype_size(a.dtype);
  uint64_t limit = (uint64_t{1} << 62) / es / static_cast<uint64_t>(size_);
  if (a.kind != K::kAllToAllv && a.count > limit) {  // alltoallv: its counts one by one (check_splits)
    fail(ErrorCode::kInvalidArgument, "{}: count {} of {} overflows the addressable size", collective_name(a.kind), a.count,
         dtype_name(a.dtype));
  }
  if (a.kind == K::kAllToAllv) check_splits(a, rank_, size_, (uint64_t{1} << 62) / es);
  if (a.kind == K::kBroadcast || a.kind == K::kReduce) {
    if (a.root < 0 || a.root >= size_) {
      fail(ErrorCode::kInvalidArgument, "{}: root {} is outside the communicator (0..{})", collective_name(a.kind), a.root, size_ - 1);
    }
  }
  if (a.kind == K::kSend || a.kind == K::kRecv) {
    if (a.kind == K::kRecv && a.root == kAnySource) {
      // a receive from any source: matched to a peer when a message arrives (OperationQueue)
    } else if (a.root < 0 || a.root >= size_) {
      fail(ErrorCode::kInvalidArgument, "{}: peer {} is outside the communicator (0..{})", collective_name(a.kind), a.root, size_ - 1);
    }
    if (a.root == rank_) fail(ErrorCode::kInvalidArgument, "{}: peer {} is this rank", collective_name(a.kind), a.root);
  }
  uint64_t sb = send_bytes(a, rank_, size_), rb = recv_bytes(a, rank_, size_);
  if (a.kind == K::kAllToAllv) {
    if (sb && !send) fail(ErrorCode::kInvalidArgument, "alltoallv: sendbuff is NULL with {} elements to send", a.splits->sent());
    if (rb && !recv) fail(ErrorCode::kInvalidArgument, "alltoallv: recvbuff is NULL with {} elements to receive", a.splits->received());
    if (sb && rb) {
      auto s0 = reinterpret_cast<uintptr_t>(send), r0 = reinterpret_cast<uintptr_t>(recv);
      if (s0 < r0 + rb && r0 < s0 + sb)
        fail(ErrorCode::kInvalidArgument, "alltoallv: sendbuff and recvbuff overlap ({} and {} bytes used): in place is not "
             "supported for unequal splits; pass separate buffers", sb, rb);
    }
    return;
  }
  if (sb && !send) fail(ErrorCode::kInvalidArgument, "{}: sendbuff is NULL with count {}", collective_name(a.kind), a.count);
  if (rb && !recv) fail(ErrorCode::kInvalidArgument, "{}: recvbuff is NULL with count {}", collective_name(a.kind), a.count);
  if (sb && rb && !a.in_place) {
    auto s0 = reinterpret_cast<uintptr_t>(send), r0 = reinterpret_cast<uintptr_t>(recv);
    if (s0 < r0 + rb && r0 < s0 + sb) {
      fail(ErrorCode::kInvalidArgument,
           "{}: sendbuff and recvbuff overlap but are not in place (in place means {})", collective_name(a.kind),
           a.kind == K::kReduceScatter ? "recvbuff == sendbuff + rank*recvcount"
           : a.kind == K::kAllGather   ? "sendbuff == recvbuff + rank*sendcount"
                                       : "sendbuff == recvbuff");
    }
  }
}

void fail_shrunk(std::string_view what) {
  fail(ErrorCode::kInvalidUsage, "{}: the communicator was shrunk (weftCommShrink): use the new one; this one can only be destroyed",
       what);
}

}  // namespace weft
