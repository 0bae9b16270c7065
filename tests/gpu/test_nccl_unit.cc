// The NCCL path's logic that needs no device: type/op/error mapping, the unique-id exchange
// through the store (a fake id), buffer classification without a device. Runs everywhere the
// library was built with NCCL; test_gpu holds what needs a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/memory_store.h"
#include "runtime/nccl/device.h"
#include "runtime/nccl/nccl_map.h"
#include "runtime/nccl/unique_id.h"

namespace weft::nccl {
namespace {

TEST(NcclMap, DataTypes) {
  EXPECT_EQ(to_nccl(DataType::kInt8), ncclInt8);
  EXPECT_EQ(to_nccl(DataType::kUint8), ncclUint8);
  EXPECT_EQ(to_nccl(DataType::kInt32), ncclInt32);
  EXPECT_EQ(to_nccl(DataType::kInt64), ncclInt64);
  EXPECT_EQ(to_nccl(DataType::kFloat16), ncclFloat16);
  EXPECT_EQ(to_nccl(DataType::kBfloat16), ncclBfloat16);
  EXPECT_EQ(to_nccl(DataType::kFloat32), ncclFloat32);
  EXPECT_EQ(to_nccl(DataType::kFloat64), ncclFloat64);
  EXPECT_THROW(to_nccl(static_cast<DataType>(kNumDataTypes)), Error);
}

TEST(NcclMap, ReductionOps) {
  EXPECT_EQ(to_nccl(RedOp::kSum), ncclSum);
  EXPECT_EQ(to_nccl(RedOp::kProd), ncclProd);
  EXPECT_EQ(to_nccl(RedOp::kMin), ncclMin);
  EXPECT_EQ(to_nccl(RedOp::kMax), ncclMax);
  EXPECT_EQ(to_nccl(RedOp::kAvg), ncclAvg);
  EXPECT_THROW(to_nccl(static_cast<RedOp>(kNumRedOps)), Error);
}

TEST(NcclMap, Errors) {
  EXPECT_EQ(error_code_of(ncclSuccess), ErrorCode::kSuccess);
  EXPECT_EQ(error_code_of(ncclInProgress), ErrorCode::kSuccess);
  EXPECT_EQ(error_code_of(ncclUnhandledCudaError), ErrorCode::kSystemError);
  EXPECT_EQ(error_code_of(ncclSystemError), ErrorCode::kSystemError);
  EXPECT_EQ(error_code_of(ncclInternalError), ErrorCode::kInternalError);
  EXPECT_EQ(error_code_of(ncclInvalidArgument), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of(ncclInvalidUsage), ErrorCode::kInvalidUsage);
  EXPECT_EQ(error_code_of(ncclRemoteError), ErrorCode::kRemoteError);
  EXPECT_NO_THROW(check(ncclSuccess, "x"));
  EXPECT_NO_THROW(check(ncclInProgress, "x"));
  try {
    check(ncclRemoteError, "ncclAllReduce");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRemoteError);
    EXPECT_NE(std::string(e.what()).find("ncclAllReduce"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ncclRemoteError"), std::string::npos) << e.what();
  }
}

Bytes fake_id(uint8_t seed) {
  Bytes b(128);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

TEST(UniqueId, TravelsThroughTheStore) {
  MemoryStore store;
  std::atomic<int> made{0};
  std::vector<Bytes> got(4);
  std::vector<std::thread> ts;
  for (int r = 0; r < 4; ++r) {
    ts.emplace_back([&, r] {
      got[r] = exchange_unique_id(store, "nccl/uid", r, 128, [&] { made++; return fake_id(3); }, Millis(10000));
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(made.load(), 1);
  for (auto& g : got) EXPECT_EQ(g, fake_id(3));
}

TEST(UniqueId, RankZeroFailureReachesTheOthers) {
  MemoryStore store;
  std::thread root([&] {
    EXPECT_THROW(exchange_unique_id(store, "k", 0, 128, []() -> Bytes { throw Error(ErrorCode::kSystemError, "no driver"); },
                                    Millis(1000)),
                 Error);
  });
  try {
    exchange_unique_id(store, "k", 1, 128, [] { return Bytes(); }, Millis(10000));
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRemoteError);
    EXPECT_NE(std::string(e.what()).find("no driver"), std::string::npos) << e.what();
  }
  root.join();
}

TEST(UniqueId, WrongSizeAndTimeout) {
  MemoryStore store;
  EXPECT_THROW(exchange_unique_id(store, "a", 0, 128, [] { return Bytes(5); }, Millis(100)), Error);
  try {
    exchange_unique_id(store, "never", 1, 128, [] { return Bytes(); }, Millis(50));
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
  }
  store.set("bad", Bytes{'I', 1, 2});
  EXPECT_THROW(exchange_unique_id(store, "bad", 2, 128, [] { return Bytes(); }, Millis(100)), Error);
}

TEST(Device, ClassifyIsSafeWithoutADevice) {
  int n = device_count();  // must not crash without a driver
  EXPECT_GE(n, 0);
  EXPECT_FALSE(classify(nullptr).device);
  std::vector<float> host(16);
  EXPECT_FALSE(classify(host.data()).device);
  int on_stack = 0;
  EXPECT_FALSE(classify(&on_stack).device);
}

TEST(Device, HostBuffersRouteToTheHostPath) {
  std::vector<float> a(16), b(16);
  for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllToAll, CollectiveKind::kBroadcast, CollectiveKind::kBarrier}) {
    CollectiveArgs args;
    args.kind = kind;
    args.count = 16;
    EXPECT_EQ(device_of_call(args, a.data(), b.data()), -1);
    EXPECT_EQ(device_of_call(args, nullptr, b.data()), -1);
    EXPECT_EQ(device_of_call(args, nullptr, nullptr), -1);
  }
}

}  // namespace
}  // namespace weft::nccl
