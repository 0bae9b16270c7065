// The overlap reducer on device gradients, checked against the exact average: gradients written
// on a non-blocking "compute" stream, marked with weftReducerMarkReadyStream on that stream,
// results waited for with weftReducerFinalizeStream + the stream. Shared by test_gpu (one rank)
// and weft-gpu-check's two-node child (two ranks, hierarchical all-reduce).
#pragma once
#include <cuda_runtime_api.h>
#include <weft/weft.h>

#include <cmath>
#include <string>
#include <vector>

namespace weft::test {

inline float reducer_grad(int rank, int param, size_t i, int step) {
  return static_cast<float>(((rank + 1) * 3 + param * 5 + static_cast<int>(i % 11) + step * 7) % 23) - 11.0f;
}

// The number of wrong elements over three steps (the third after the bucket rebuild); *why says
// what failed when a call did (then the result is > 0).
inline size_t device_reducer_check(weftComm_t comm, int rank, int nranks, bool view, std::string* why) {
  const std::vector<size_t> sizes = {300, 17, 1000, 5, 2048, 64, 777, 1};
  auto bad = [&](const std::string& what) {
    *why = what + ": " + weftGetLastErrorMessage();
    return size_t{1};
  };
  std::vector<float*> dev(sizes.size(), nullptr);
  for (size_t p = 0; p < sizes.size(); ++p) {
    if (cudaMalloc(reinterpret_cast<void**>(&dev[p]), sizes[p] * 4) != cudaSuccess) return bad("cudaMalloc");
  }
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  weftReducerConfig_t cfg;
  weftReducerConfigInit(&cfg);
  cfg.bucketCapBytes = 4096;
  cfg.firstBucketCapBytes = 1024;
  cfg.gradientAsBucketView = view ? 1 : 0;
  weftReducer_t red = nullptr;
  size_t wrong = 0;
  if (weftReducerCreate(comm, &cfg, &red) != weftSuccess) return bad("weftReducerCreate");
  for (size_t p = 0; p < sizes.size() && !wrong; ++p) {
    // A device pointer decides device buckets (in bucket-view mode too).
    if (weftReducerAddParam(red, dev[p], sizes[p], weftFloat32, nullptr, nullptr) != weftSuccess) wrong = bad("weftReducerAddParam");
  }
  std::vector<std::vector<float>> host(sizes.size());
  for (int step = 0; step < 3 && !wrong; ++step) {
    if (weftReducerBeginStep(red, 1) != weftSuccess) { wrong = bad("weftReducerBeginStep"); break; }
    std::vector<float*> at(sizes.size());
    for (size_t p = 0; p < sizes.size(); ++p) {
      host[p].resize(sizes[p]);
      for (size_t i = 0; i < sizes[p]; ++i) host[p][i] = reducer_grad(rank, static_cast<int>(p), i, step);
      void* v = dev[p];
      if (view && weftReducerGradView(red, static_cast<int>(p), &v) != weftSuccess) { wrong = bad("weftReducerGradView"); break; }
      at[p] = static_cast<float*>(v);
    }
    for (int p = static_cast<int>(sizes.size()) - 1; p >= 0 && !wrong; --p) {  // the backward's order
      cudaMemcpyAsync(at[p], host[p].data(), sizes[p] * 4, cudaMemcpyHostToDevice, s);
      if (weftReducerMarkReadyStream(red, p, s) != weftSuccess) wrong = bad("weftReducerMarkReadyStream");
    }
    if (wrong) break;
    weftStepStats_t st;
    if (weftReducerFinalizeStream(red, &st, s) != weftSuccess) { wrong = bad("weftReducerFinalizeStream"); break; }
    if (cudaStreamSynchronize(s) != cudaSuccess) { wrong = bad("cudaStreamSynchronize"); break; }
    for (size_t p = 0; p < sizes.size(); ++p) {
      std::vector<float> got(sizes[p]);
      cudaMemcpy(got.data(), at[p], sizes[p] * 4, cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < sizes[p]; ++i) {
        double want = 0;
        for (int r = 0; r < nranks; ++r) want += reducer_grad(r, static_cast<int>(p), i, step);
        if (std::fabs(got[i] - want / nranks) > 1e-6) wrong++;
      }
    }
    if (wrong && why->empty()) *why = "step " + std::to_string(step + 1) + ": results differ from the average";
  }
  weftReducerDestroy(red);
  cudaStreamDestroy(s);
  for (float* d : dev) cudaFree(d);
  return wrong;
}

}  // namespace weft::test
