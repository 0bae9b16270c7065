// Where a buffer lives, asked of the CUDA runtime. Safe without a driver or a device: every CUDA
// error is cleared and the answer is "host".
#pragma once
#include <cuda_runtime_api.h>

#include "collectives/collective.h"

namespace weft::nccl {

// The number of CUDA devices; 0 when cudaGetDeviceCount fails (no driver, no device). Asked once
// per process (the answer is cached), so host-only programs pay for it once and never create a
// CUDA context.
int device_count();

struct BufferPlace {
  bool device = false;  // cudaMemoryTypeDevice or cudaMemoryTypeManaged
  int ordinal = -1;     // the device it belongs to (managed: the caller's current device)
};
// nullptr, host memory (pageable or pinned) and anything when there is no device: host.
BufferPlace classify(const void* p);

// Routing: the CUDA device of the call's buffers, or -1 when they are host memory (or absent).
// Throws kInvalidArgument for host and device buffers mixed, or buffers on two devices, and
// kInvalidUsage for device buffers on a collective the NCCL path does not carry.
int device_of_call(const CollectiveArgs& a, const void* send, const void* recv);

// Throws weft::Error (kSystemError) naming what and the CUDA error, clearing it.
void cuda_check(cudaError_t e, const char* what);

}  // namespace weft::nccl
