// weft-gpu-check: the NCCL path on one GPU in a few minutes (scripts/gpu-check runs it).
//  1. all-reduce, every type and op, device buffers against the host path (one rank);
//  2. the hierarchical all-reduce: two copies of this program (--hier-child) as two "nodes" on
//     the one GPU, every type/op at odd sizes, and the reducer on device over the two ranks;
//  3. overlap: "gradient" buckets computed on one stream while the previous ones are all-reduced
//     on another, ordered with CUDA events (as a DDP backward), timed with CUDA events, first with
//     raw ...Stream all-reduces, then with the overlap reducer on device gradients; prints one
//     table: how much of the communication time the compute hides.
// Exit status 1 when anything is wrong. Options: --buckets K (8), --iters N (compute per bucket).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/gpu/gpu_util.h"
#include "tests/gpu/one_rank.h"
#include "tests/gpu/two_nodes.h"

namespace weft::test {
int hier_child_main();  // tests/gpu/hier_child.cc
}

#if WEFT_GPU_CHECK_KERNEL
extern "C" void weft_check_compute(float* y, const float* x, size_t n, int iters, int blocks, cudaStream_t s);
#endif

namespace {

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)
#define WK(x)                                                                                          \
  do {                                                                                                 \
    weftResult_t r_ = (x);                                                                             \
    if (r_ != weftSuccess) {                                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, weftGetLastErrorMessage());     \
      std::exit(2);                                                                                    \
    }                                                                                                  \
  } while (0)

int correctness(weftComm_t comm) {
  const size_t count = (1 << 20) + 3;
  int bad = 0, total = 0;
  void *din = nullptr, *dout = nullptr;
  CK(cudaMalloc(&din, count * 8));
  CK(cudaMalloc(&dout, count * 8));
  for (int t = 0; t < weftNumTypes; ++t) {
    for (int o = 0; o < weftNumOps; ++o) {
      auto dt = static_cast<weftDataType_t>(t);
      auto op = static_cast<weftRedOp_t>(o);
      size_t bytes = count * weft::test::type_size(dt);
      auto in = weft::test::make_data(dt, count, t * 5 + o);
      std::vector<uint8_t> want(bytes), got(bytes);
      WK(weftAllReduce(in.data(), want.data(), count, dt, op, comm));
      CK(cudaMemcpy(din, in.data(), bytes, cudaMemcpyHostToDevice));
      weftResult_t r = weftAllReduce(din, dout, count, dt, op, comm);
      CK(cudaMemcpy(got.data(), dout, bytes, cudaMemcpyDeviceToHost));
      size_t wrong = r == weftSuccess ? weft::test::count_wrong(dt, got, want, count) : count;
      total++;
      if (wrong) {
        bad++;
        std::printf("  all-reduce %-8s %-4s: %zu wrong%s%s\n", weft::test::type_name(dt), weft::test::op_name(op), wrong,
                    r == weftSuccess ? "" : ": ", r == weftSuccess ? "" : weftCommGetLastError(comm));
      }
    }
  }
  CK(cudaFree(din));
  CK(cudaFree(dout));
  std::printf("correctness: all-reduce on device vs host path, %d type/op pairs, %d wrong\n", total, bad);
  return bad;
}

// Two copies of this program as two nodes (tests/gpu/two_nodes.h); 64 KiB chunks so that the
// larger sizes take several.
int hierarchical() {
  char self[4096] = {};
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    std::printf("correctness: hierarchical all-reduce: cannot find this program (/proc/self/exe)\n");
    return 1;
  }
  auto res = weft::test::run_two_nodes(self, {"--hier-child"}, {{"WEFT_GPU_CHUNK_BYTES", "65536"}, {"WEFT_TIMEOUT_MS", "120000"}}, 600);
  int bad = 0;
  for (int r = 0; r < 2; ++r) {
    if (res[r].status != 0) {
      bad++;
      std::printf("  hierarchical rank %d exited with %d:\n%s", r, res[r].status, res[r].output.c_str());
    }
  }
  std::string summary = res[0].output.substr(res[0].output.rfind("hier rank") == std::string::npos ? 0 : res[0].output.rfind("hier rank"));
  std::printf("correctness: hierarchical all-reduce, 2 processes as 2 nodes on one GPU (every type/op, sizes 0..100003, out of "
              "place, in place, stream; reducer on device): %s",
              bad ? "FAILED\n" : summary.c_str());
  return bad;
}

struct Streams {
  cudaStream_t compute, comm;
};

// The "backward": bucket i's compute, on s.
void compute(float* y, const float* x, size_t n, int iters, cudaStream_t s) {
#if WEFT_GPU_CHECK_KERNEL
  weft_check_compute(y, x, n, iters, 66, s);
#else
  for (int k = 0; k < std::max(1, iters / 64); ++k) CK(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
#endif
}

float elapsed(cudaEvent_t a, cudaEvent_t b) {
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

// mode 0: compute only; 1: comm only; 2: both on one stream (serial); 3: overlapped.
// Out of place (bucket i -> out[i]): at one rank an in-place all-reduce may move nothing.
float run(int mode, weftComm_t comm, const Streams& st, std::vector<float*>& buckets, std::vector<float*>& out, float* y,
          const float* x, size_t n, size_t bucket_elems, int iters) {
  std::vector<cudaEvent_t> ready(buckets.size());
  for (auto& e : ready) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  cudaEvent_t start, comm_done, end;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&end));
  CK(cudaEventCreateWithFlags(&comm_done, cudaEventDisableTiming));
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(start, st.compute));
  CK(cudaStreamWaitEvent(st.comm, start, 0));
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (mode != 1) compute(y, x, n, iters, st.compute);
    if (mode == 0) continue;
    cudaStream_t cs = mode == 2 ? st.compute : st.comm;
    if (mode == 3) {
      CK(cudaEventRecord(ready[i], st.compute));  // bucket i's gradients are ready
      CK(cudaStreamWaitEvent(st.comm, ready[i], 0));
    }
    WK(weftAllReduceStream(buckets[i], out[i], bucket_elems, weftFloat32, weftSum, comm, cs));
  }
  CK(cudaEventRecord(comm_done, st.comm));
  CK(cudaStreamWaitEvent(st.compute, comm_done, 0));
  CK(cudaEventRecord(end, st.compute));
  float ms = elapsed(start, end);
  for (auto& e : ready) CK(cudaEventDestroy(e));
  CK(cudaEventDestroy(start));
  CK(cudaEventDestroy(end));
  CK(cudaEventDestroy(comm_done));
  return ms;
}

// The overlap reducer on device gradients: nparams gradients of one bucket each, gradient i
// "computed" on the compute stream, then weftReducerMarkReadyStream(i, compute);
// weftReducerFinalizeStream(compute). mode 0: compute only; 1: reducer only; 2: compute with a
// reducer that launches nothing before finalize (serial); 3: compute with the overlapping reducer.
float reducer_run(int mode, weftReducer_t serial, weftReducer_t overlapped, const Streams& st, size_t nparams, float* y,
                  const float* x, size_t n, int iters) {
  weftReducer_t red = mode == 0 ? nullptr : mode == 2 ? serial : overlapped;
  cudaEvent_t start, end;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&end));
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(start, st.compute));
  if (red) WK(weftReducerBeginStep(red, 1));
  for (size_t i = 0; i < nparams; ++i) {
    if (mode != 1) compute(y, x, n, iters, st.compute);
    if (red) WK(weftReducerMarkReadyStream(red, static_cast<int>(i), st.compute));
  }
  if (red) WK(weftReducerFinalizeStream(red, nullptr, st.compute));
  CK(cudaEventRecord(end, st.compute));
  float ms = elapsed(start, end);
  CK(cudaEventDestroy(start));
  CK(cudaEventDestroy(end));
  return ms;
}

void reducer_rows(weftComm_t comm, const Streams& st, int nbuckets, float* y, const float* x, size_t n, int iters) {
  for (size_t mib : {1, 4, 16, 64}) {
    size_t elems = (mib << 20) / 4;
    std::vector<float*> grads(static_cast<size_t>(nbuckets));
    for (auto& g : grads) {
      CK(cudaMalloc(reinterpret_cast<void**>(&g), elems * 4));
      CK(cudaMemset(g, 0, elems * 4));
    }
    weftReducer_t red[2] = {nullptr, nullptr};  // serial, overlapped
    for (int k = 0; k < 2; ++k) {
      weftReducerConfig_t cfg;
      WK(weftReducerConfigInit(&cfg));
      cfg.bucketCapBytes = cfg.firstBucketCapBytes = elems * 4;  // one gradient per bucket
      cfg.rebuildBuckets = 0;
      cfg.overlap = k;
      WK(weftReducerCreate(comm, &cfg, &red[k]));
      for (float* g : grads) WK(weftReducerAddParam(red[k], g, elems, weftFloat32, nullptr, nullptr));
    }
    for (int mode = 1; mode < 4; ++mode) reducer_run(mode, red[0], red[1], st, grads.size(), y, x, n, iters);  // warm-up
    float t[4];
    for (int mode = 0; mode < 4; ++mode) t[mode] = reducer_run(mode, red[0], red[1], st, grads.size(), y, x, n, iters);
    double hidden = t[1] > 0 ? std::clamp((t[2] - t[3]) / t[1], 0.0f, 1.0f) * 100.0 : 0.0;
    std::printf("%-8s %10zu %8d %11.3f %9.3f %10.3f %14.3f %9.1f\n", "reducer", mib, nbuckets, t[0], t[1], t[2], t[3], hidden);
    for (auto* r : red) WK(weftReducerDestroy(r));
    for (float* g : grads) CK(cudaFree(g));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && !std::strcmp(argv[1], "--hier-child")) return weft::test::hier_child_main();
  int nbuckets = 8, iters = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--buckets")) nbuckets = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--iters")) iters = std::max(1, std::atoi(argv[i + 1]));
  }
  std::string why;
  if (weft::test::gpu_count(&why) == 0) {
    std::printf("weft-gpu-check: SKIPPED: no CUDA device (%s)\n", why.c_str());
    return 0;
  }
  int avail = 0;
  weftNcclAvailable(&avail);
  if (!avail) {
    std::printf("weft-gpu-check: SKIPPED: Weft was built without NCCL\n");
    return 0;
  }
  CK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s, %d SMs; compute: %s\n", prop.name, prop.multiProcessorCount,
              WEFT_GPU_CHECK_KERNEL ? "saxpy loop kernel on 66 blocks" : "device-to-device copies (built without nvcc)");
  weftComm_t comm = nullptr;
  WK(weft::test::init_one_rank(&comm));
  int bad = correctness(comm);
  bad += hierarchical();

  Streams st{};
  CK(cudaStreamCreateWithFlags(&st.compute, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&st.comm, cudaStreamNonBlocking));
  const size_t n = size_t{16} << 20;  // the compute's working set: 64 MiB of float
  float *x = nullptr, *y = nullptr;
  CK(cudaMalloc(reinterpret_cast<void**>(&x), n * 4));
  CK(cudaMalloc(reinterpret_cast<void**>(&y), n * 4));
  CK(cudaMemset(x, 0, n * 4));
  CK(cudaMemset(y, 0, n * 4));
  std::printf("\n%-8s %10s %8s %11s %9s %10s %14s %9s\n", "path", "bucket_MiB", "buckets", "compute_ms", "comm_ms", "serial_ms",
              "overlapped_ms", "hidden_%");
  for (size_t mib : {1, 4, 16, 64}) {
    size_t elems = (mib << 20) / 4;
    std::vector<float*> buckets(static_cast<size_t>(nbuckets)), out(buckets.size());
    for (size_t i = 0; i < buckets.size(); ++i) {
      CK(cudaMalloc(reinterpret_cast<void**>(&buckets[i]), elems * 4));
      CK(cudaMalloc(reinterpret_cast<void**>(&out[i]), elems * 4));
      CK(cudaMemset(buckets[i], 0, elems * 4));
    }
    run(3, comm, st, buckets, out, y, x, n, elems, iters);  // warm-up
    float t[4];
    for (int mode = 0; mode < 4; ++mode) t[mode] = run(mode, comm, st, buckets, out, y, x, n, elems, iters);
    double hidden = t[1] > 0 ? std::clamp((t[2] - t[3]) / t[1], 0.0f, 1.0f) * 100.0 : 0.0;
    std::printf("%-8s %10zu %8d %11.3f %9.3f %10.3f %14.3f %9.1f\n", "raw", mib, nbuckets, t[0], t[1], t[2], t[3], hidden);
    for (size_t i = 0; i < buckets.size(); ++i) {
      CK(cudaFree(buckets[i]));
      CK(cudaFree(out[i]));
    }
  }
  reducer_rows(comm, st, nbuckets, y, x, n, iters);
  std::printf("hidden_%% = (serial - overlapped) / comm: the share of all-reduce time the compute covers\n"
              "raw: weftAllReduceStream per bucket; reducer: the overlap reducer on device gradients (copy in, all-reduce,\n"
              "copy back on its communication stream); at one rank its communication is the copies and NCCL's one-rank\n"
              "all-reduce\n");
  CK(cudaFree(x));
  CK(cudaFree(y));
  WK(weftCommDestroy(comm));
  return bad ? 1 : 0;
}
