// Deterministic mode in real processes (process/determinism_main.cc; issue 47, docs/DETERMINISM.md):
// repeated jobs with a rank delayed at random before each call, other slice sizes, forced
// algorithms and the direct path off give the same bits (and each rank checks them against the
// rank-order fold); without the mode the forced algorithm changes the bits (so the guarantee is
// not vacuous); weftAllReduceShards gives the same bits on 1, 2 and 4 ranks and refuses 3.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <string>

#include "runtime/transport/shm/shm_transport.h"
#include "support/spawn.h"

namespace {

using weft::test::dump;
using weft::test::run_job;

// Every "HASH <case> <hash>" line of every rank (rank-prefixed case names).
std::map<std::string, std::string> hashes(int ranks, const std::vector<std::string>& argv, std::vector<std::string> env) {
  env.push_back("WEFT_TIMEOUT_MS=60000");
  auto rs = run_job(ranks, argv, env, std::chrono::seconds(120));
  std::map<std::string, std::string> out;
  for (size_t r = 0; r < rs.size(); ++r) {
    EXPECT_EQ(rs[r].status, 0) << dump(rs);
    EXPECT_NE(rs[r].output.find("OK"), std::string::npos) << dump(rs);
    const std::regex line("HASH (\\S+) (\\S+)");
    for (std::sregex_iterator it(rs[r].output.begin(), rs[r].output.end(), line), end; it != end; ++it)
      out[std::to_string(r) + ":" + (*it)[1].str()] = (*it)[2].str();
  }
  return out;
}

class Determinism : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!weft::ShmTransport::usable())
      GTEST_SKIP() << "cross-memory attach is refused here (kernel.yama.ptrace_scope), so the shared-memory transport cannot run";
  }
};

TEST_F(Determinism, RunsWithOtherTimingsSlicesAndAlgorithmsGiveTheSameBits) {
  const std::vector<std::vector<std::string>> variants = {
      {},
      {"WEFT_SLICE_BYTES=32768", "WEFT_ALGO=ring"},
      {"WEFT_ALGO=rhd", "WEFT_DIRECT_BYTES=0"},
      {"WEFT_ALGO=tree", "WEFT_SLICE_BYTES=65536", "WEFT_DIRECT_BYTES=32768", "WEFT_DIRECT_PIECE_BYTES=65536"},
  };
  std::map<std::string, std::string> first;
  for (const auto& v : variants) {
    auto env = v;
    env.push_back("WEFT_DETERMINISTIC=1");
    const auto got = hashes(3, {WEFT_TEST_DETERMINISM, "calls"}, env);
    ASSERT_EQ(got.size(), 3u * 2 * 4 * 2 * 3 * 2 + 4 * 2 * 3 * 2) << "a rank printed fewer results than it ran";
    if (first.empty()) first = got;
    else EXPECT_EQ(got, first) << "with " << ::testing::PrintToString(v);
  }
}

// The same two jobs without the mode: the forced algorithm changes some all-reduce's bits.
TEST_F(Determinism, WithoutTheModeTheAlgorithmChangesTheBits) {
  const auto ring = hashes(3, {WEFT_TEST_DETERMINISM, "calls"}, {"WEFT_ALGO=ring", "WEFT_DIRECT_BYTES=0"});
  const auto rhd = hashes(3, {WEFT_TEST_DETERMINISM, "calls"}, {"WEFT_ALGO=rhd", "WEFT_DIRECT_BYTES=0"});
  ASSERT_EQ(ring.size(), rhd.size());
  std::set<std::string> differ;
  for (const auto& [name, h] : ring)
    if (rhd.at(name) != h) differ.insert(name);
  EXPECT_FALSE(differ.empty()) << "ring and rhd gave the same bits for every all-reduce: the test data cannot tell orders apart";
  std::printf("[ figure ] without deterministic mode, %zu of %zu results differ between ring and rhd\n", differ.size(), ring.size());
}

TEST_F(Determinism, VirtualShardsGiveTheSameBitsOnOneTwoAndFourRanks) {
  std::map<std::string, std::string> first;
  for (int ranks : {1, 2, 4}) {
    const auto got = hashes(ranks, {WEFT_TEST_DETERMINISM, "shards", "4"}, {});
    std::map<std::string, std::string> mine;
    for (const auto& [name, h] : got) {
      mine[name.substr(name.find(':') + 1)] = h;
      EXPECT_EQ(h, got.at("0:" + name.substr(name.find(':') + 1))) << "ranks disagree on " << name;
    }
    ASSERT_EQ(mine.size(), 8u) << ranks << " ranks";
    if (first.empty()) first = mine;
    else EXPECT_EQ(mine, first) << ranks << " ranks";
  }
}

TEST_F(Determinism, VirtualShardsRefuseARankCountThatCannotHoldThem) {
  auto rs = run_job(3, {WEFT_TEST_DETERMINISM, "shards", "4"}, {"WEFT_TIMEOUT_MS=60000"}, std::chrono::seconds(60));
  for (const auto& r : rs) {
    EXPECT_EQ(r.status, 0) << dump(rs);
    EXPECT_NE(r.output.find("REFUSED weftAllReduceShards: 4 virtual shards cannot be spread evenly over 3 ranks (rank "
                            "counts that can hold 4 shards: 1, 2, 4)"),
              std::string::npos)
        << dump(rs);
  }
  rs = run_job(3, {WEFT_TEST_DETERMINISM, "shards", "6"}, {"WEFT_TIMEOUT_MS=60000"}, std::chrono::seconds(60));
  for (const auto& r : rs)
    EXPECT_NE(r.output.find("REFUSED weftAllReduceShards: rank 1's shards 2..3 are not one subtree"), std::string::npos) << dump(rs);
}

}  // namespace
