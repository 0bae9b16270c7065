// weft-gpu-check --hier-child: one rank of the two-node hierarchical check (tests/gpu/two_nodes.h
// starts both). Every type and op at sizes 0, 1, primes and more than a chunk (the parent sets
// WEFT_GPU_CHUNK_BYTES=65536), out of place, in place and on a stream, against the host path over
// the same communicator; then the reducer on device gradients over the two ranks. Prints one line
// per failure and a summary; exit status 0 when nothing is wrong.
#include <cuda_runtime_api.h>
#include <weft/weft.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tests/gpu/gpu_util.h"
#include "tests/gpu/reducer_check.h"

namespace weft::test {

int hier_child_main() {
  if (cudaSetDevice(0) != cudaSuccess) {
    std::printf("hier child: cudaSetDevice(0) failed\n");
    return 2;
  }
  weftComm_t comm = nullptr;
  if (weftCommInitFromEnv(&comm) != weftSuccess) {
    std::printf("hier child: weftCommInitFromEnv: %s\n", weftGetLastErrorMessage());
    return 2;
  }
  int rank = 0, n = 0, node = 0, nodes = 0;
  weftCommRank(comm, &rank);
  weftCommCount(comm, &n);
  weftCommNode(comm, &node, &nodes);
  if (nodes != 2) {
    std::printf("hier rank %d: the job spans %d nodes, expected 2 (WEFT_NODE_ID)\n", rank, nodes);
    return 1;
  }
  const std::vector<size_t> counts = {0, 1, 7, 4099, 100003};  // 100003 elements > one 64 KiB chunk of every type
  int checks = 0, bad = 0;
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void *din = nullptr, *dout = nullptr;
  cudaMalloc(&din, 100003 * 8);
  cudaMalloc(&dout, 100003 * 8);
  for (size_t count : counts) {
    for (int t = 0; t < weftNumTypes; ++t) {
      for (int o = 0; o < weftNumOps; ++o) {
        auto dt = static_cast<weftDataType_t>(t);
        auto op = static_cast<weftRedOp_t>(o);
        size_t bytes = count * type_size(dt);
        auto in = make_data(dt, count, t * 5 + o + rank * 3);
        std::vector<uint8_t> want(bytes + 1), got(bytes + 1);
        if (weftAllReduce(in.data(), want.data(), count, dt, op, comm) != weftSuccess) {
          std::printf("hier rank %d: host reference failed: %s\n", rank, weftCommGetLastError(comm));
          return 1;
        }
        // 0: out of place; 1: in place; 2: in place on a stream.
        for (int mode = 0; mode < 3; ++mode) {
          cudaMemcpy(din, in.data(), bytes, cudaMemcpyHostToDevice);
          void* out = mode == 0 ? dout : din;
          weftResult_t r = mode == 2 ? weftAllReduceStream(din, out, count, dt, op, comm, s)
                                     : weftAllReduce(din, out, count, dt, op, comm);
          if (mode == 2) cudaStreamSynchronize(s);
          cudaMemcpy(got.data(), out, bytes, cudaMemcpyDeviceToHost);
          size_t wrong = r == weftSuccess ? count_wrong(dt, got, want, count) : count + 1;
          checks++;
          if (wrong) {
            bad++;
            std::printf("hier rank %d: all-reduce %s %s count %zu %s: %zu wrong%s%s\n", rank, type_name(dt), op_name(op), count,
                        mode == 0 ? "out of place" : mode == 1 ? "in place" : "stream", wrong, r == weftSuccess ? "" : ": ",
                        r == weftSuccess ? "" : weftCommGetLastError(comm));
          }
        }
      }
    }
  }
  cudaFree(din);
  cudaFree(dout);
  cudaStreamDestroy(s);
  for (bool view : {false, true}) {
    std::string why;
    size_t wrong = device_reducer_check(comm, rank, n, view, &why);
    checks++;
    if (wrong) {
      bad++;
      std::printf("hier rank %d: reducer on device (%s): %zu wrong: %s\n", rank, view ? "bucket view" : "copy", wrong, why.c_str());
    }
  }
  std::printf("hier rank %d of %d: %d checks, %d wrong\n", rank, n, checks, bad);
  weftCommDestroy(comm);
  return bad ? 1 : 0;
}

}  // namespace weft::test
