// The compute side of weft-gpu-check's overlap measurement: a saxpy loop on a limited grid (so
// that NCCL's kernels find free SMs, as a framework's backward pass leaves some).
#include <cuda_runtime.h>

#include <cstddef>

namespace {
__global__ void saxpy_loop(float* y, const float* x, float a, size_t n, int iters) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t j = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; j < n; j += stride) {
    float v = y[j], xv = x[j];
    for (int k = 0; k < iters; ++k) v = a * xv + v * 0.999f;
    y[j] = v;
  }
}
}  // namespace

extern "C" void weft_check_compute(float* y, const float* x, size_t n, int iters, int blocks, cudaStream_t s) {
  saxpy_loop<<<blocks, 256, 0, s>>>(y, x, 1.0001f, n, iters);
}
