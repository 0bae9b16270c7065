// The shared-memory latency path (runtime/transport/shm/shm_direct.*): every collective it takes
// (all-reduce, reduce, broadcast, all-gather, barrier), every type and op, sizes 0, 1, primes,
// and the largest it takes and one element past it (which must go to the scheduled path), in and
// out of place, 2..5 thread-ranks over the shared-memory transport, each checked against the
// independent reference of collective_check.h. Each case asserts which path ran (the
// communicator's count of direct calls), so a change of threshold cannot silently skip it.
#include <gtest/gtest.h>

#include <atomic>

#include "collectives/collective_check.h"
#include "support/multirank.h"

namespace weft::test {
namespace {

constexpr DataType kTypes[] = {DataType::kInt8,    DataType::kUint8,    DataType::kInt32,   DataType::kInt64,
                               DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64};
constexpr RedOp kOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax, RedOp::kAvg};

class ShmDirectPath : public ::testing::TestWithParam<int> {};

TEST_P(ShmDirectPath, EveryTypeOpAndSizeMatchesTheReference) {
  const int n = GetParam();
  CommConfig cfg = test_config();
  cfg.direct_bytes = 4096;  // small, so that the cases past it stay quick
  cfg.direct_piece_bytes = 0;  // past it: the scheduled path (pieces: ShmDirectPieces below)
  std::vector<CollCase> cases;
  for (DataType dt : kTypes) {
    const uint64_t limit = static_cast<uint64_t>(cfg.direct_bytes) / dtype_size(dt);
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{7}, uint64_t{13}, uint64_t{251}, limit, limit + 1}) {
      for (bool in_place : {false, true}) {
        for (RedOp op : kOps) {
          cases.push_back({CollectiveKind::kAllReduce, dt, op, count, n, 0, in_place});
          cases.push_back({CollectiveKind::kReduce, dt, op, count, n, n - 1, in_place});
        }
        cases.push_back({CollectiveKind::kBroadcast, dt, RedOp::kSum, count, n, n / 2, in_place});
        cases.push_back({CollectiveKind::kAllGather, dt, RedOp::kSum, count, n, 0, in_place});
      }
    }
  }
  cases.push_back({CollectiveKind::kBarrier, DataType::kUint8, RedOp::kSum, 0, n, 0, false});
  std::atomic<int> failures{0};
  run_ranks(
      n, TransportKind::kShm,
      [&](Communicator& comm) {
        ASSERT_STREQ(comm.transport_name(), "shm");
        for (const CollCase& c : cases) {
          RankBuffers b = make_buffers(c, comm.rank());
          const uint64_t before = comm.direct_calls();
          comm.submit(CollectiveArgs{c.kind, c.count, c.dt, c.op, c.root, false}, b.send, b.recv);
          const bool direct = c.count * dtype_size(c.dt) <= static_cast<uint64_t>(cfg.direct_bytes);
          if (comm.direct_calls() - before != (direct ? 1u : 0u) && failures++ < 10)
            ADD_FAILURE() << c.label() << ": expected the " << (direct ? "direct" : "scheduled") << " path";
          if (c.kind == CollectiveKind::kBarrier) continue;
          std::string err = check_buffers(c, comm.rank(), b);
          if (!err.empty() && failures++ < 10) ADD_FAILURE() << c.label() << ": " << err;
        }
      },
      cfg);
  EXPECT_EQ(failures.load(), 0);
}
INSTANTIATE_TEST_SUITE_P(Ranks, ShmDirectPath, ::testing::Values(2, 3, 4, 5));

// All-reduces past the one-round limit, in pieces (WEFT_DIRECT_PIECE_BYTES), each reduce-scattered
// and all-gathered through the slots: every type and op, counts that leave a short last piece and
// shares of 0 elements (count < ranks), in and out of place; every one takes the direct path.
class ShmDirectPieces : public ::testing::TestWithParam<int> {};
TEST_P(ShmDirectPieces, EveryTypeAndOpMatchesTheReference) {
  const int n = GetParam();
  CommConfig cfg = test_config();
  cfg.direct_bytes = 64;
  cfg.direct_piece_bytes = 1000;  // not a multiple of every type's size: pieces of whole elements
  std::vector<CollCase> cases;
  for (DataType dt : kTypes)
    for (uint64_t count : {uint64_t{0}, uint64_t{3}, uint64_t{9}, uint64_t{251}, uint64_t{1009}, uint64_t{4099}})
      for (bool in_place : {false, true})
        for (RedOp op : kOps) cases.push_back({CollectiveKind::kAllReduce, dt, op, count, n, 0, in_place});
  std::atomic<int> failures{0};
  run_ranks(
      n, TransportKind::kShm,
      [&](Communicator& comm) {
        for (const CollCase& c : cases) {
          RankBuffers b = make_buffers(c, comm.rank());
          const uint64_t before = comm.direct_calls();
          comm.submit(CollectiveArgs{c.kind, c.count, c.dt, c.op, c.root, false}, b.send, b.recv);
          if (comm.direct_calls() - before != 1u && failures++ < 10) ADD_FAILURE() << c.label() << ": not the direct path";
          std::string err = check_buffers(c, comm.rank(), b);
          if (!err.empty() && failures++ < 10) ADD_FAILURE() << c.label() << ": " << err;
        }
      },
      cfg);
  EXPECT_EQ(failures.load(), 0);
}
INSTANTIATE_TEST_SUITE_P(Ranks, ShmDirectPieces, ::testing::Values(2, 3, 4, 5));

// A blocking call on an idle communicator runs on the caller's thread (no Operation: submit
// returns none); one made while asynchronous calls are queued runs after them, in order.
TEST(ShmDirectPath, BlockingCallsRunInlineOrAfterTheQueuedOnes) {
  run_ranks(
      2, TransportKind::kShm,
      [&](Communicator& comm) {
        std::vector<float> v(16, 1.0f);
        const CollectiveArgs sum{CollectiveKind::kAllReduce, v.size(), DataType::kFloat32, RedOp::kSum, 0, false};
        const CollectiveArgs prod{CollectiveKind::kAllReduce, v.size(), DataType::kFloat32, RedOp::kProd, 0, false};
        const uint64_t before = comm.direct_calls();
        EXPECT_EQ(comm.submit(sum, v.data(), v.data()), nullptr) << "a blocking call hands back no Operation";
        EXPECT_EQ(v[0], 2.0f);
        // sum then product: (2 + 2) * (2 + 2) = 16; the other order would give 2 * 2 + 2 * 2 = 8.
        auto queued = comm.submit(sum, v.data(), v.data(), SubmitMode::kAsync);
        comm.run(prod, v.data(), v.data());
        EXPECT_TRUE(queued->test()) << "the blocking call ran after the queued one";
        EXPECT_EQ(v[0], 16.0f);
        EXPECT_EQ(v[15], 16.0f);
        EXPECT_EQ(comm.direct_calls() - before, 3u) << "every call took the latency path";
      },
      test_config());
}

// Off with WEFT_DIRECT_BYTES=0, and never taken when an algorithm is forced: the user's choice runs.
TEST(ShmDirectPath, OffWhenDisabledOrAnAlgorithmIsForced) {
  for (int variant = 0; variant < 2; ++variant) {
    CommConfig cfg = test_config();
    if (variant == 0) cfg.direct_bytes = 0;
    else cfg.algo = "ring";
    run_ranks(
        2, TransportKind::kShm,
        [&](Communicator& comm) {
          std::vector<float> v(16, 1.0f);
          comm.submit(CollectiveArgs{CollectiveKind::kAllReduce, v.size(), DataType::kFloat32, RedOp::kSum, 0, false}, v.data(),
                      v.data());
          EXPECT_EQ(v[0], 2.0f);
          EXPECT_EQ(comm.direct_calls(), 0u) << "variant " << variant;
        },
        cfg);
  }
}

// Ranks that disagree on the count, type or collective of a direct call get an error naming the
// difference on every rank, within the timeout, instead of reading each other's slots.
TEST(ShmDirectPath, MismatchIsNamedOnEveryRank) {
  CommConfig cfg = test_config();
  cfg.timeout = std::chrono::milliseconds(5000);
  std::atomic<int> errors{0};
  run_ranks(
      3, TransportKind::kShm,
      [&](Communicator& comm) {
        std::vector<float> v(64, 1.0f);
        const DataType dt = comm.rank() == 1 ? DataType::kInt32 : DataType::kFloat32;
        try {
          comm.submit(CollectiveArgs{CollectiveKind::kAllReduce, 16, dt, RedOp::kSum, 0, false}, v.data(), v.data());
          ADD_FAILURE() << "rank " << comm.rank() << ": a mismatched call succeeded";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("mismatch"), std::string::npos) << e.what();
          errors++;
        }
      },
      cfg);
  EXPECT_EQ(errors.load(), 3);
}

}  // namespace
}  // namespace weft::test
