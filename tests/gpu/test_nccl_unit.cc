// The NCCL path's logic that needs no device: type/op/error mapping, the unique-id exchange
// through the store (a fake id), buffer classification without a device, and the hierarchical
// all-reduce's orchestration (sub-communicators, blocks for uneven counts, chunks). Runs everywhere the
// library was built with NCCL; test_gpu holds what needs a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/store/memory_store.h"
#include "runtime/transport/nccl/device.h"
#include "runtime/transport/nccl/hier_plan.h"
#include "runtime/transport/nccl/nccl_map.h"
#include "runtime/transport/nccl/unique_id.h"

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

TEST(HierPlan, LayoutOfContiguousAndInterleavedNodes) {
  HierLayout h = hier_layout({0, 0, 1, 1}, 3);
  EXPECT_TRUE(h.usable) << h.why;
  EXPECT_EQ(h.node, 1);
  EXPECT_EQ(h.nodes, 2);
  EXPECT_EQ(h.local_rank, 1);
  EXPECT_EQ(h.local_size, 2);
  h = hier_layout({0, 1, 0, 1, 0, 1}, 4);  // round-robin placement: local rank = order within the node
  EXPECT_TRUE(h.usable);
  EXPECT_EQ(h.node, 0);
  EXPECT_EQ(h.local_rank, 2);
  EXPECT_EQ(h.local_size, 3);
  h = hier_layout({0, 1}, 1);  // the two-process GPU test: one rank per node
  EXPECT_TRUE(h.usable);
  EXPECT_EQ(h.node, 1);
  EXPECT_EQ(h.local_rank, 0);
  EXPECT_EQ(h.local_size, 1);
}

TEST(HierPlan, UnusableLayoutsSayWhy) {
  HierLayout h = hier_layout({0, 0, 0}, 1);
  EXPECT_FALSE(h.usable);
  EXPECT_NE(h.why.find("one node"), std::string::npos) << h.why;
  h = hier_layout({0, 0, 1}, 2);
  EXPECT_FALSE(h.usable);
  EXPECT_NE(h.why.find("different numbers of ranks"), std::string::npos) << h.why;
  EXPECT_FALSE(hier_layout({0, 1}, 2).usable);
  EXPECT_TRUE(use_hierarchical(CollectiveKind::kAllReduce, true, hier_layout({0, 1}, 0)));
  EXPECT_FALSE(use_hierarchical(CollectiveKind::kAllReduce, false, hier_layout({0, 1}, 0)));
  EXPECT_FALSE(use_hierarchical(CollectiveKind::kBroadcast, true, hier_layout({0, 1}, 0)));
  EXPECT_FALSE(use_hierarchical(CollectiveKind::kAllReduce, true, hier_layout({0, 0}, 0)));
}

TEST(HierPlan, NodePhaseOfUnevenCounts) {
  NodePhase p = node_phase(10, 4);
  EXPECT_EQ(p.even, 2u);
  EXPECT_EQ(p.tail, (Range{8, 2}));
  EXPECT_EQ(p.tail_root, 3);
  EXPECT_EQ(owned_block(p, 0, 4), (Range{0, 2}));
  EXPECT_EQ(owned_block(p, 2, 4), (Range{4, 2}));
  EXPECT_EQ(owned_block(p, 3, 4), (Range{6, 4}));
  p = node_phase(3, 4);  // fewer elements than local ranks: no reduce-scatter, the tail is all
  EXPECT_EQ(p.even, 0u);
  EXPECT_EQ(p.tail, (Range{0, 3}));
  EXPECT_EQ(owned_block(p, 0, 4).count, 0u);
  EXPECT_EQ(owned_block(p, 3, 4), (Range{0, 3}));
  p = node_phase(7, 1);
  EXPECT_EQ(p.even, 7u);
  EXPECT_EQ(p.tail.count, 0u);
  EXPECT_EQ(owned_block(p, 0, 1), (Range{0, 7}));
  EXPECT_EQ(node_phase(0, 8).tail.count, 0u);
  EXPECT_THROW(node_phase(5, 0), Error);
}

// For every count and local size: the blocks tile [0, count) in local-rank order, and the chunks
// of each block tile the block, none larger than the chunk.
TEST(HierPlan, BlocksAndChunksTileTheBuffer) {
  for (uint64_t count = 0; count < 70; ++count) {
    for (int l = 1; l <= 9; ++l) {
      NodePhase p = node_phase(count, l);
      uint64_t next = 0;
      for (int r = 0; r < l; ++r) {
        Range b = owned_block(p, r, l);
        ASSERT_EQ(b.offset, next) << count << " " << l << " " << r;
        next += b.count;
        for (uint64_t es : {1, 2, 4, 8}) {
          uint64_t at = b.offset;
          for (const Range& c : chunks_of(b, es, 16)) {
            ASSERT_EQ(c.offset, at);
            ASSERT_GT(c.count, 0u);
            ASSERT_LE(c.count * es, std::max<uint64_t>(16, es));
            at += c.count;
          }
          ASSERT_EQ(at, b.offset + b.count);
        }
      }
      ASSERT_EQ(next, count);
    }
  }
}

TEST(HierPlan, Chunks) {
  auto c = chunks_of(Range{100, 10}, 4, 16);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], (Range{100, 4}));
  EXPECT_EQ(c[1], (Range{104, 4}));
  EXPECT_EQ(c[2], (Range{108, 2}));
  EXPECT_TRUE(chunks_of(Range{5, 0}, 4, 16).empty());
  EXPECT_EQ(chunks_of(Range{0, 3}, 8, 4).size(), 3u);  // a chunk smaller than an element: one element each
  EXPECT_EQ(chunks_of(Range{0, (4u << 20) + 1}, 4, 4u << 20).size(), 5u);
}

}  // namespace
}  // namespace weft::nccl
