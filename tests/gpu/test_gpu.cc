// The NCCL path on a real GPU, at one rank: every type and op of all-reduce against the host path,
// the other collectives, stream calls, routing errors, split (ncclCommSplit), the overlap reducer
// on device gradients, abort; and the hierarchical all-reduce with two processes as two nodes on
// the one GPU. Every test skips (GTEST_SKIP) when cudaGetDeviceCount fails or finds no device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/gpu/gpu_util.h"
#include "tests/gpu/one_rank.h"
#include "tests/gpu/reducer_check.h"
#include "tests/gpu/two_nodes.h"

namespace {

using weft::test::count_wrong;
using weft::test::make_data;
using weft::test::type_size;

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x

// A device buffer freed at scope exit.
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { cudaMalloc(&p, bytes ? bytes : 1); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (weft::test::gpu_count(&why) == 0) GTEST_SKIP() << "no CUDA device: " << why;
    int avail = 0;
    weftNcclAvailable(&avail);
    if (!avail) GTEST_SKIP() << "built without NCCL";
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    if (!comm_) {
      ASSERT_EQ(weft::test::init_one_rank(&comm_), weftSuccess) << weftGetLastErrorMessage();
    }
  }
  static void TearDownTestSuite() {
    if (comm_) weftCommDestroy(comm_);
    comm_ = nullptr;
  }
  static weftComm_t comm_;
};
weftComm_t Gpu::comm_ = nullptr;

TEST_F(Gpu, AllReduceEveryTypeAndOpMatchesTheHostPath) {
  const size_t count = 4099;
  for (int t = 0; t < weftNumTypes; ++t) {
    for (int o = 0; o < weftNumOps; ++o) {
      auto dt = static_cast<weftDataType_t>(t);
      auto op = static_cast<weftRedOp_t>(o);
      size_t bytes = count * type_size(dt);
      auto in = make_data(dt, count, t + o);
      std::vector<uint8_t> want(bytes), got(bytes);
      ASSERT_EQ(weftAllReduce(in.data(), want.data(), count, dt, op, comm_), weftSuccess) << weftCommGetLastError(comm_);
      DeviceBuffer din(bytes), dout(bytes);
      CUDA_OK(cudaMemcpy(din.p, in.data(), bytes, cudaMemcpyHostToDevice));
      ASSERT_EQ(weftAllReduce(din.p, dout.p, count, dt, op, comm_), weftSuccess) << weftCommGetLastError(comm_);
      CUDA_OK(cudaMemcpy(got.data(), dout.p, bytes, cudaMemcpyDeviceToHost));
      EXPECT_EQ(count_wrong(dt, got, want, count), 0u) << weft::test::type_name(dt) << " " << weft::test::op_name(op);
    }
  }
}

TEST_F(Gpu, StreamCallsAndInPlace) {
  const size_t count = 1 << 16;
  auto in = make_data(weftFloat32, count, 1);
  size_t bytes = count * 4;
  DeviceBuffer d(bytes), out(bytes);
  CUDA_OK(cudaMemcpy(d.p, in.data(), bytes, cudaMemcpyHostToDevice));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ASSERT_EQ(weftAllReduceStream(d.p, d.p, count, weftFloat32, weftSum, comm_, s), weftSuccess) << weftCommGetLastError(comm_);
  ASSERT_EQ(weftBroadcastStream(d.p, out.p, count, weftFloat32, 0, comm_, s), weftSuccess);
  ASSERT_EQ(weftReduceStream(out.p, d.p, count, weftFloat32, weftMax, 0, comm_, s), weftSuccess);
  ASSERT_EQ(weftAllGatherStream(d.p, out.p, count, weftFloat32, comm_, s), weftSuccess);
  ASSERT_EQ(weftReduceScatterStream(out.p, d.p, count, weftFloat32, weftMin, comm_, s), weftSuccess);
  CUDA_OK(cudaStreamSynchronize(s));
  std::vector<uint8_t> got(bytes);
  CUDA_OK(cudaMemcpy(got.data(), d.p, bytes, cudaMemcpyDeviceToHost));
  EXPECT_EQ(count_wrong(weftFloat32, got, in, count), 0u);
  CUDA_OK(cudaStreamDestroy(s));
}

TEST_F(Gpu, RoutingErrors) {
  std::vector<float> host(256);
  DeviceBuffer d(256 * 4);
  EXPECT_EQ(weftAllReduce(host.data(), d.p, 256, weftFloat32, weftSum, comm_), weftInvalidArgument);
  EXPECT_NE(std::string(weftCommGetLastError(comm_)).find("host memory"), std::string::npos) << weftCommGetLastError(comm_);
  DeviceBuffer d2(256 * 4);
  EXPECT_EQ(weftAllToAll(d.p, d2.p, 256, weftFloat32, comm_), weftInvalidUsage);
  // The communicator is still usable after both.
  EXPECT_EQ(weftAllReduce(d.p, d2.p, 256, weftFloat32, weftSum, comm_), weftSuccess) << weftCommGetLastError(comm_);
}

TEST_F(Gpu, AsyncDeviceCallRunsOnTheProgressThread) {
  const size_t count = 1 << 20;
  auto in = make_data(weftBfloat16, count, 5);
  size_t bytes = count * 2;
  DeviceBuffer din(bytes), dout(bytes);
  CUDA_OK(cudaMemcpy(din.p, in.data(), bytes, cudaMemcpyHostToDevice));
  weftRequest_t req = nullptr;
  ASSERT_EQ(weftAllReduceAsync(din.p, dout.p, count, weftBfloat16, weftAvg, comm_, &req), weftSuccess);
  ASSERT_EQ(weftWait(req, -1), weftSuccess) << weftCommGetLastError(comm_);
  std::vector<uint8_t> got(bytes);
  CUDA_OK(cudaMemcpy(got.data(), dout.p, bytes, cudaMemcpyDeviceToHost));
  EXPECT_EQ(count_wrong(weftBfloat16, got, in, count), 0u);
}

TEST_F(Gpu, SplitUsesNcclCommSplit) {
  DeviceBuffer d(1024 * 4), o(1024 * 4);
  ASSERT_EQ(weftAllReduce(d.p, o.p, 1024, weftFloat32, weftSum, comm_), weftSuccess);  // the NCCL comm exists
  weftComm_t sub = nullptr, none = nullptr;
  ASSERT_EQ(weftCommSplit(comm_, 0, 0, &sub), weftSuccess) << weftCommGetLastError(comm_);
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(weftAllReduce(d.p, o.p, 1024, weftFloat32, weftSum, sub), weftSuccess) << weftCommGetLastError(sub);
  EXPECT_EQ(weftCommDestroy(sub), weftSuccess);
  ASSERT_EQ(weftCommSplit(comm_, -1, 0, &none), weftSuccess) << weftCommGetLastError(comm_);
  EXPECT_EQ(none, nullptr);
}

TEST_F(Gpu, ReducerOnDeviceGradients) {
  for (bool view : {false, true}) {
    std::string why;
    EXPECT_EQ(weft::test::device_reducer_check(comm_, 0, 1, view, &why), 0u) << (view ? "bucket view: " : "copy: ") << why;
  }
}

TEST_F(Gpu, ReducerOnDeviceUnusedIsZeroAndMixingIsRefused) {
  DeviceBuffer a(64 * 4), b(64 * 4);
  std::vector<float> fives(64, 5.0f), host(64);
  CUDA_OK(cudaMemcpy(a.p, fives.data(), 256, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(b.p, fives.data(), 256, cudaMemcpyHostToDevice));
  weftReducer_t red = nullptr;
  ASSERT_EQ(weftReducerCreate(comm_, nullptr, &red), weftSuccess) << weftGetLastErrorMessage();
  ASSERT_EQ(weftReducerAddParam(red, a.p, 64, weftFloat32, "a", nullptr), weftSuccess) << weftGetLastErrorMessage();
  ASSERT_EQ(weftReducerAddParam(red, b.p, 64, weftFloat32, "b", nullptr), weftSuccess) << weftGetLastErrorMessage();
  EXPECT_EQ(weftReducerAddParam(red, host.data(), 64, weftFloat32, "host", nullptr), weftInvalidArgument);
  ASSERT_EQ(weftReducerMarkReadyStream(red, 0, nullptr), weftSuccess) << weftGetLastErrorMessage();
  ASSERT_EQ(weftReducerMarkUnused(red, 1), weftSuccess) << weftGetLastErrorMessage();
  ASSERT_EQ(weftReducerFinalize(red, nullptr), weftSuccess) << weftGetLastErrorMessage();
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(host.data(), a.p, 256, cudaMemcpyDeviceToHost));
  EXPECT_EQ(host[63], 5.0f);
  CUDA_OK(cudaMemcpy(host.data(), b.p, 256, cudaMemcpyDeviceToHost));
  EXPECT_EQ(host[0], 0.0f);
  EXPECT_EQ(weftReducerDestroy(red), weftSuccess);
}

// Two processes with different WEFT_NODE_ID on this GPU: each node's NCCL communicator has one rank
// and the inter-node phase is Weft's host path (weft-gpu-check --hier-child is the rank program).
TEST_F(Gpu, HierarchicalAllReduceTwoNodesOnOneGpu) {
  auto res = weft::test::run_two_nodes(WEFT_GPU_CHECK_EXE, {"--hier-child"},
                                       {{"WEFT_GPU_CHUNK_BYTES", "65536"}, {"WEFT_TIMEOUT_MS", "120000"}}, 600);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[r].status, 0) << "rank " << r << ":\n" << res[r].output;
}

// Last: aborts a communicator of its own.
TEST_F(Gpu, AbortFailsLaterDeviceCalls) {
  weftComm_t c = nullptr;
  ASSERT_EQ(weft::test::init_one_rank(&c), weftSuccess) << weftGetLastErrorMessage();
  DeviceBuffer d(4096), o(4096);
  ASSERT_EQ(weftAllReduce(d.p, o.p, 1024, weftFloat32, weftSum, c), weftSuccess) << weftCommGetLastError(c);
  ASSERT_EQ(weftCommAbort(c), weftSuccess);
  EXPECT_EQ(weftAllReduce(d.p, o.p, 1024, weftFloat32, weftSum, c), weftRemoteError);
  EXPECT_EQ(weftCommDestroy(c), weftSuccess);
}

}  // namespace
