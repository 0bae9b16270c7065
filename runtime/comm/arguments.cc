#include "runtime/comm/arguments.h"

#include "runtime/base/error.h"

namespace weft {

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
  if (a.count > limit) {
    fail(ErrorCode::kInvalidArgument, "{}: count {} of {} overflows the addressable size", collective_name(a.kind), a.count,
         dtype_name(a.dtype));
  }
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
