// The ...Stream calls and weftNcclAvailable in every build: without NCCL they are weftInvalidUsage
// ("built without NCCL"); with NCCL, host buffers on a stream call take the host path (here: no
// device needed, the NULL stream).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/gpu/one_rank.h"
#include "weft/config.h"

namespace {

class StreamApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(weft::test::init_one_rank(&comm_), weftSuccess) << weftGetLastErrorMessage(); }
  static void TearDownTestSuite() {
    if (comm_) weftCommDestroy(comm_);
    comm_ = nullptr;
  }
  static weftComm_t comm_;
};
weftComm_t StreamApi::comm_ = nullptr;

TEST_F(StreamApi, Availability) {
  int avail = -1;
  ASSERT_EQ(weftNcclAvailable(&avail), weftSuccess);
  EXPECT_EQ(avail, WEFT_HAVE_NCCL);
  EXPECT_EQ(weftNcclAvailable(nullptr), weftInvalidArgument);
}

TEST_F(StreamApi, HostBuffers) {
  std::vector<float> in(64), out(64, -1.f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) * 0.5f;
  weftResult_t results[] = {
      weftAllReduceStream(in.data(), out.data(), 64, weftFloat32, weftSum, comm_, nullptr),
      weftReduceScatterStream(in.data(), out.data(), 64, weftFloat32, weftMax, comm_, nullptr),
      weftAllGatherStream(in.data(), out.data(), 64, weftFloat32, comm_, nullptr),
      weftBroadcastStream(in.data(), out.data(), 64, weftFloat32, 0, comm_, nullptr),
      weftReduceStream(in.data(), out.data(), 64, weftFloat32, weftMin, 0, comm_, nullptr),
  };
  for (weftResult_t r : results) {
#if WEFT_HAVE_NCCL
    EXPECT_EQ(r, weftSuccess) << weftCommGetLastError(comm_);
#else
    EXPECT_EQ(r, weftInvalidUsage);
    EXPECT_NE(std::string(weftGetLastErrorMessage()).find("built without NCCL"), std::string::npos);
#endif
  }
#if WEFT_HAVE_NCCL
  EXPECT_EQ(out, in);
#endif
}

TEST_F(StreamApi, BadArguments) {
  std::vector<float> in(8), out(8);
  weftResult_t r = weftAllReduceStream(in.data(), out.data(), 8, static_cast<weftDataType_t>(99), weftSum, comm_, nullptr);
  EXPECT_TRUE(r == weftInvalidArgument || r == weftInvalidUsage) << r;
  EXPECT_NE(weftAllReduceStream(in.data(), out.data(), 8, weftFloat32, weftSum, nullptr, nullptr), weftSuccess);
  EXPECT_NE(weftBroadcastStream(in.data(), out.data(), 8, weftFloat32, 5, comm_, nullptr), weftSuccess);
}

}  // namespace
