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

// Windows (weftMemAlloc): all-reduces whose buffers are windows on every rank run on
// the shared path (no copies: each rank reduces its share from every rank's buffer into all of
// them): every type and op, counts of 1, primes, fewer than the ranks and not divisible by them,
// in and out of place (and mixed: one rank in place, the others not, or the other way), at
// offsets that are not page-aligned, 2..4 thread-ranks; the guards around each buffer in the
// windows must come back untouched. A rank whose buffer is not a window sends every rank to
// another path, with the same results; calls of up to WEFT_DIRECT_BYTES keep the one-round path.
class ShmWindows : public ::testing::TestWithParam<int> {};
TEST_P(ShmWindows, EveryTypeAndOpMatchesTheReference) {
  const int n = GetParam();
  CommConfig cfg = test_config();
  cfg.direct_bytes = 16;  // up to 16 bytes in one round through the slots; past it the shared path
  std::vector<CollCase> cases;
  for (DataType dt : kTypes)
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{7}, uint64_t{251}, uint64_t{4099}, uint64_t{20011}})
      for (bool in_place : {false, true})
        for (RedOp op : kOps) cases.push_back({CollectiveKind::kAllReduce, dt, op, count, n, 0, in_place});
  constexpr uint64_t kWindow = 256 << 10;
  std::atomic<int> failures{0};
  run_ranks(
      n, TransportKind::kShm,
      [&](Communicator& comm) {
        auto* ws = static_cast<uint8_t*>(comm.mem_alloc(kWindow));
        auto* wr = static_cast<uint8_t*>(comm.mem_alloc(kWindow));
        for (size_t i = 0; i < cases.size(); ++i) {
          // Every fourth case rank 0 goes the other way (out of place among in-place ranks, or in
          // place among out-of-place ones): the block is then reduced into another rank's buffer.
          CollCase c = cases[i];
          if (i % 4 == 1 && comm.rank() == 0) c.in_place = !c.in_place;
          RankBuffers b = make_buffers(c, comm.rank());
          // The images (guards included) at an offset that moves with the case; the last rank's
          // buffers are plain memory for every seventh case.
          const size_t at = 8 * (i % 5);
          const bool plain = i % 7 == 3 && comm.rank() == n - 1;
          uint8_t* s = plain ? b.s.data() : ws + at;
          uint8_t* r = plain ? b.r.data() : wr + at;
          if (!plain) {  // (in place, b.s is empty)
            if (!b.s.empty()) std::memcpy(s, b.s.data(), b.s.size());
            std::memcpy(r, b.r.data(), b.r.size());
          }
          const size_t G = RankBuffers::kGuard;
          const void* send = c.in_place ? static_cast<const void*>(r + G) : s + G;
          comm.submit(CollectiveArgs{c.kind, c.count, c.dt, c.op, c.root, false}, send, r + G);
          const std::string algo = comm.last_algorithm();
          if (!plain) {
            if (!b.s.empty()) std::memcpy(b.s.data(), s, b.s.size());
            std::memcpy(b.r.data(), r, b.r.size());
          }
          const bool shared = c.count * dtype_size(c.dt) > 16 && i % 7 != 3;
          if ((algo == "window") != shared && failures++ < 10)
            ADD_FAILURE() << c.label() << ": ran '" << algo << "', expected " << (shared ? "the shared path" : "another");
          std::string err = check_buffers(c, comm.rank(), b);
          if (!err.empty() && failures++ < 10) ADD_FAILURE() << c.label() << (plain ? " (plain)" : "") << ": " << err;
        }
        comm.mem_free(ws);
        comm.mem_free(wr);
        EXPECT_THROW(comm.mem_free(ws), Error) << "a second free";
      },
      cfg);
  EXPECT_EQ(failures.load(), 0);
}
INSTANTIATE_TEST_SUITE_P(Ranks, ShmWindows, ::testing::Values(2, 3, 4));

// weftMemAlloc with unequal sizes, or 0 bytes, fails on every rank with an error naming it.
TEST(ShmWindowsAlloc, UnequalSizesAreNamedOnEveryRank) {
  CommConfig cfg = test_config();
  cfg.timeout = std::chrono::milliseconds(5000);
  std::atomic<int> unequal{0}, zero{0};
  run_ranks(
      3, TransportKind::kShm,
      [&](Communicator& comm) {
        try {
          comm.mem_alloc(comm.rank() == 2 ? 8192 : 4096);
          ADD_FAILURE() << "rank " << comm.rank() << ": unequal sizes were accepted";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("same size"), std::string::npos) << e.what();
          unequal++;
        }
        try {
          comm.mem_alloc(0);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("0 bytes"), std::string::npos) << e.what();
          zero++;
        }
        // Still usable: a window of the same size on every rank works.
        auto* p = static_cast<float*>(comm.mem_alloc(1 << 20));
        for (int i = 0; i < (1 << 18); ++i) p[i] = static_cast<float>(comm.rank() + 1);
        comm.submit(CollectiveArgs{CollectiveKind::kAllReduce, 1 << 18, DataType::kFloat32, RedOp::kSum, 0, false}, p, p);
        EXPECT_STREQ(comm.last_algorithm(), "window");
        EXPECT_EQ(p[0], 6.0f);
        EXPECT_EQ(p[(1 << 18) - 1], 6.0f);
        comm.mem_free(p);
      },
      cfg);
  EXPECT_EQ(unequal.load(), 3);
  EXPECT_EQ(zero.load(), 3);
}

}  // namespace
}  // namespace weft::test
