// weftAllToAllv (all-to-all with unequal splits) in real processes (process/alltoallv_main.cc), over
// shared memory and over UCX, at 2, 3 and 4 ranks: every data type, zero, odd and prime counts,
// three layouts of the blocks, blocking and asynchronous calls, checked byte by byte against the
// rank program's own reference; the argument errors; and ranks that disagree on a count, which
// must fail every rank well within the timeout, the message naming both ranks and both counts.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <tuple>

#include "runtime/transport/shm/shm_transport.h"
#include "support/spawn.h"

namespace {

using weft::test::dump;
using weft::test::run_job;

std::vector<std::string> env_for(const std::string& transport, const std::string& timeout_ms) {
  return {"WEFT_TRANSPORT=" + std::string(transport == "shm" ? "auto" : "ucx"), "WEFT_LOG_LEVEL=info",
          "WEFT_TIMEOUT_MS=" + timeout_ms};
}

void expect_transport(const std::vector<weft::test::RankResult>& rs, const std::string& transport) {
  for (const auto& r : rs) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, std::regex("communicator ready: .* transport (\\S+)"))) << dump(rs);
    EXPECT_EQ(m[1].str(), transport) << dump(rs);
  }
}

class AllToAllv : public ::testing::TestWithParam<std::tuple<const char*, int>> {
 protected:
  void SetUp() override {
    if (transport() == "shm" && !weft::ShmTransport::usable())
      GTEST_SKIP() << "cross-memory attach is refused here (kernel.yama.ptrace_scope), so the shared-memory transport cannot run";
  }
  std::string transport() const { return std::get<0>(GetParam()); }
  int ranks() const { return std::get<1>(GetParam()); }
};

TEST_P(AllToAllv, UnequalSplitsMatchTheReference) {
  auto rs = run_job(ranks(), {WEFT_TEST_ALLTOALLV, "check"}, env_for(transport(), "60000"), std::chrono::seconds(240));
  expect_transport(rs, transport());
  for (size_t r = 0; r < rs.size(); ++r) {
    EXPECT_EQ(rs[r].status, 0) << dump(rs);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(rs[r].output, m, std::regex("rank \\d+: OK (\\d+) calls in (\\S+) s"))) << dump(rs);
    if (r == 0)
      std::printf("[ figure ] %s %d ranks: %s calls in %s s\n", transport().c_str(), ranks(), m[1].str().c_str(), m[2].str().c_str());
  }
}

// Rank 0 sends rank 1 more than rank 1 expects ("more"), or the last rank sends rank 0 nothing
// where rank 0 expects elements ("less"): the receiver names the mismatch, both ranks and both
// arrays; every other rank fails too (the broken communicator is published), all long before the
// 20 s timeout, and the next call fails at once.
TEST_P(AllToAllv, ACountTheRanksDisagreeOnFailsEveryRank) {
  for (const char* how : {"more", "less"}) {
    SCOPED_TRACE(how);
    auto rs = run_job(ranks(), {WEFT_TEST_ALLTOALLV, "mismatch", how}, env_for(transport(), "20000"), std::chrono::seconds(90));
    expect_transport(rs, transport());
    const int n = ranks();
    const int receiver = std::string(how) == "more" ? 1 : 0, sender = std::string(how) == "more" ? 0 : n - 1;
    for (int r = 0; r < n; ++r) {
      const std::string& out = rs[static_cast<size_t>(r)].output;
      EXPECT_EQ(rs[static_cast<size_t>(r)].status, 0) << dump(rs);
      EXPECT_NE(out.find("ERROR"), std::string::npos) << dump(rs);
      EXPECT_EQ(out.find("NO-ERROR"), std::string::npos) << dump(rs);
      EXPECT_LT(rs[static_cast<size_t>(r)].seconds, 12.0) << dump(rs);
      std::smatch m;
      ASSERT_TRUE(std::regex_search(out, m, std::regex("AFTER (\\d+)"))) << dump(rs);
      EXPECT_NE(m[1].str(), "0") << "a call on the broken communicator succeeded\n" << dump(rs);
      // Every rank's message names the pair and both arrays (the receiver's own, the others' quoted).
      const std::string both = "rank " + std::to_string(sender) + "'s sendcounts[" + std::to_string(receiver) + "] and rank " +
                               std::to_string(receiver) + "'s recvcounts[" + std::to_string(sender) + "] differ";
      EXPECT_NE(out.find(both), std::string::npos) << "rank " << r << " does not name both counts\n" << dump(rs);
    }
    const std::string& recv_out = rs[static_cast<size_t>(receiver)].output;
    EXPECT_NE(recv_out.find("ERROR 2 in call 0"), std::string::npos) << "the receiver: weftInvalidUsage on the first call\n" << dump(rs);
    EXPECT_NE(recv_out.find("mismatch with rank " + std::to_string(sender)), std::string::npos) << dump(rs);
    std::printf("[ figure ] %s %d ranks, %s: every rank failed within %.1f s\n", transport().c_str(), n, how,
                std::max_element(rs.begin(), rs.end(), [](const auto& a, const auto& b) { return a.seconds < b.seconds; })->seconds);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, AllToAllv,
                         ::testing::Combine(::testing::Values("shm", "ucx"), ::testing::Values(2, 3, 4)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });

}  // namespace
