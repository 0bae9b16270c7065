#include "runtime/transport/nccl/device.h"

#include "runtime/base/error.h"

#include "collectives/collective.h"

namespace weft::nccl {

int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear: a missing driver is not an error for host-only programs
      return 0;
    }
    return n;
  }();
  return count;
}

BufferPlace classify(const void* p) {
  BufferPlace place;
  if (!p || device_count() == 0) return place;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return place;
  }
  if (attr.type == cudaMemoryTypeDevice) {
    place.device = true;
    place.ordinal = attr.device;
  } else if (attr.type == cudaMemoryTypeManaged) {
    place.device = true;
    int cur = 0;
    place.ordinal = cudaGetDevice(&cur) == cudaSuccess ? cur : attr.device;
  }
  return place;
}

namespace {

bool nccl_capable(CollectiveKind k) {
  return k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduceScatter || k == CollectiveKind::kAllGather ||
         k == CollectiveKind::kBroadcast || k == CollectiveKind::kReduce;
}

}  // namespace

// The CUDA device of the call's buffers, or -1 when they are host memory (or absent).
int device_of_call(const CollectiveArgs& a, const void* send, const void* recv) {
  BufferPlace s = classify(send), r = classify(recv);
  if (!s.device && !r.device) return -1;
  auto kind = [](const void* p, const BufferPlace& b) { return !p ? "NULL" : b.device ? "device" : "host"; };
  if ((send && !s.device) || (recv && !r.device)) {
    fail(ErrorCode::kInvalidArgument, "{}: sendbuff is {} memory but recvbuff is {} memory; both must be device memory (NCCL) "
         "or both host memory", collective_name(a.kind), kind(send, s), kind(recv, r));
  }
  if (send && recv && s.ordinal != r.ordinal) {
    fail(ErrorCode::kInvalidArgument, "{}: sendbuff is on device {} but recvbuff on device {}", collective_name(a.kind),
         s.ordinal, r.ordinal);
  }
  if (!nccl_capable(a.kind)) {
    fail(ErrorCode::kInvalidUsage, "{}: device buffers are supported for all-reduce, reduce-scatter, all-gather, broadcast and "
         "reduce (the NCCL path); copy to host memory for this call", collective_name(a.kind));
  }
  return send ? s.ordinal : r.ordinal;
}

void cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  fail(ErrorCode::kSystemError, "CUDA: {} failed: {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

}  // namespace weft::nccl
