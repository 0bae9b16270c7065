// Communicator::shrink (weftCommShrink) with thread-ranks over inproc and UCX: explicit lists on a
// healthy communicator, the NULL agreement (a rank that left or aborted is excluded, a healthy
// group keeps everyone), mismatched lists and bad arguments, and what the old communicator still
// allows. Deaths of real processes are in tests/process (ShrinkProcesses.*).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <optional>

#include "support/multirank.h"

using namespace weft;
using namespace weft::test;

namespace {

CollectiveArgs args(CollectiveKind kind, uint64_t count, DataType type) {
  CollectiveArgs a;
  a.kind = kind;
  a.count = count;
  a.dtype = type;
  return a;
}

// The new communicator holds exactly `old_ranks` (ascending), this rank at its dense index:
// checked by what the ranks say through it (an all-gather of their old ranks, an all-reduce at an
// odd size), not only by its size.
void expect_members(Communicator& child, const std::vector<int>& old_ranks, int my_old_rank) {
  ASSERT_EQ(child.size(), static_cast<int>(old_ranks.size()));
  ASSERT_EQ(child.rank(), static_cast<int>(std::find(old_ranks.begin(), old_ranks.end(), my_old_rank) - old_ranks.begin()));
  EXPECT_EQ(child.shrunk_from(), old_ranks);
  std::vector<int32_t> all(old_ranks.size(), -1);
  int32_t me = my_old_rank;
  child.submit(args(CollectiveKind::kAllGather, 1, DataType::kInt32), &me, all.data());
  EXPECT_EQ(std::vector<int>(all.begin(), all.end()), old_ranks);
  std::vector<float> v(30011, static_cast<float>(my_old_rank + 1));
  child.submit(args(CollectiveKind::kAllReduce, v.size(), DataType::kFloat32), v.data(), v.data());
  float want = 0;
  for (int r : old_ranks) want += static_cast<float>(r + 1);
  for (float f : v) ASSERT_EQ(f, want);
}

// What the old communicator answers once shrunk: collectives, split, set_algorithm and another
// shrink are weftInvalidUsage naming the shrink; the getters still answer.
void expect_only_destroyable(Communicator& old) {
  std::vector<float> v(16, 1.0f);
  for (int k = 0; k < 4; ++k) {
    try {
      switch (k) {
        case 0: old.submit(args(CollectiveKind::kAllReduce, v.size(), DataType::kFloat32), v.data(), v.data()); break;
        case 1: old.split(0, 0); break;
        case 2: old.set_algorithm("ring"); break;
        default: old.shrink(std::nullopt); break;
      }
      ADD_FAILURE() << "call " << k << " on a shrunk communicator succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << e.what();
      EXPECT_NE(std::string(e.what()).find("shrunk"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(old.shrunk());
  EXPECT_GE(old.size(), 1);
  EXPECT_NO_THROW(old.failed_ranks());
}

class Shrink : public ::testing::TestWithParam<TransportKind> {};

// 5 ranks; the survivors leave out ranks 1 and 4 by an explicit list (the same on each), the
// excluded ranks never call: ranks 0, 2, 3 become 0, 1, 2.
TEST_P(Shrink, ExplicitListOnAHealthyCommunicator) {
  run_ranks(5, GetParam(), [](Communicator& comm) {
    const std::vector<int> excluded = {4, 1};  // any order
    if (comm.rank() == 1 || comm.rank() == 4) return;
    auto child = comm.shrink(excluded);
    expect_members(*child, {0, 2, 3}, comm.rank());
    expect_only_destroyable(comm);
    child->destroy();
  });
}

// NULL on a healthy communicator where nobody failed: every rank stays (a duplicate).
TEST_P(Shrink, NullOnAHealthyCommunicatorKeepsEveryRank) {
  run_ranks(3, GetParam(), [](Communicator& comm) {
    EXPECT_TRUE(comm.failed_ranks().empty());
    auto child = comm.shrink(std::nullopt);
    expect_members(*child, {0, 1, 2}, comm.rank());
    child->destroy();
  });
}

// NULL agrees on the ranks known gone: rank 2 aborts its communicator (the others' call fails,
// broken) and then destroys it, rank 3 destroys its own at once; the survivors 0 and 1 shrink
// with NULL and get {0, 1}, whoever noticed what first.
TEST_P(Shrink, NullExcludesRanksThatFailedOrLeft) {
  CommConfig cfg = test_config();
  cfg.timeout = std::chrono::milliseconds(10000);
  run_ranks(
      4, GetParam(),
      [](Communicator& comm) {
        std::vector<float> v(1000, 1.0f);
        if (comm.rank() == 3) return;  // leaves (run_ranks destroys its communicator)
        if (comm.rank() == 2) {
          comm.abort("rank 2 gives up");
          return;
        }
        EXPECT_THROW(comm.submit(args(CollectiveKind::kAllReduce, v.size(), DataType::kFloat32), v.data(), v.data()), Error);
        EXPECT_TRUE(comm.broken());
        auto child = comm.shrink(std::nullopt);
        expect_members(*child, {0, 1}, comm.rank());
        child->destroy();
      },
      cfg);
}

// Survivors that pass different lists (or NULL and a list) all get the same weftInvalidUsage,
// and nobody builds a communicator; the old one stays usable for another, correct shrink.
TEST_P(Shrink, DifferentListsAreAnErrorOnEverySurvivor) {
  std::atomic<int> errors{0};
  run_ranks(4, GetParam(), [&](Communicator& comm) {
    if (comm.rank() == 3) return;
    std::optional<std::vector<int>> mine = std::vector<int>{3};
    if (comm.rank() == 1) mine = std::nullopt;
    try {
      comm.shrink(mine);
      ADD_FAILURE() << "rank " << comm.rank() << ": different lists were accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << e.what();
      EXPECT_NE(std::string(e.what()).find("different arguments"), std::string::npos) << e.what();
      errors++;
    }
    EXPECT_FALSE(comm.shrunk());
    auto child = comm.shrink(std::vector<int>{3});
    expect_members(*child, {0, 1, 2}, comm.rank());
    child->destroy();
  });
  EXPECT_EQ(errors.load(), 3);
}

// Bad lists fail on the calling rank alone, before anything is sent (no other rank calls), and
// leave the communicator as it was.
TEST_P(Shrink, BadListsAreRejectedLocally) {
  run_ranks(3, GetParam(), [](Communicator& comm) {
    const int me = comm.rank();
    const std::vector<std::pair<std::vector<int>, const char*>> bad = {
        {{3}, "not a rank"}, {{-1}, "not a rank"}, {{(me + 1) % 3, (me + 1) % 3}, "twice"}, {{me}, "this rank"}};
    for (const auto& [list, why] : bad) {
      try {
        comm.shrink(list);
        ADD_FAILURE() << "accepted a bad list";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
        EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("weftCommShrink"), std::string::npos) << e.what();
      }
    }
    EXPECT_FALSE(comm.shrunk());
    std::vector<float> v(100, 1.0f);
    comm.submit(args(CollectiveKind::kAllReduce, v.size(), DataType::kFloat32), v.data(), v.data());
    EXPECT_EQ(v[0], 3.0f);
  });
}

// A shrunk communicator can be shrunk again (the new one), down to one rank, and each is a real
// communicator of its own: 4 -> 3 -> 2 -> 1.
TEST_P(Shrink, RepeatedShrinksDownToOneRank) {
  run_ranks(4, GetParam(), [](Communicator& comm) {
    std::shared_ptr<Communicator> cur = comm.shrink(std::nullopt);
    std::vector<int> old_ranks = {0, 1, 2, 3};
    for (int last = 3; last >= 1; --last) {
      if (comm.rank() == last) break;  // this rank leaves: the others exclude it
      auto next = cur->shrink(std::vector<int>{last});
      old_ranks.pop_back();
      expect_members(*next, old_ranks, comm.rank());
      cur->destroy();
      cur = next;
    }
    cur->destroy();
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, Shrink, ::testing::Values(TransportKind::kInproc, TransportKind::kUcx),
                         [](const auto& info) { return std::string(transport_label(info.param)); });

}  // namespace
