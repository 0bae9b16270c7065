// Many operations in flight on one communicator, in real processes (process/inflight_main.cc), over
// shared memory ("auto") and UCX: receives posted before their sends, K messages around a ring in
// mixed orders, two communicators waited in opposite orders, all-reduces overlapping in time (read
// from the flight recorder), and a rank dying with 8 all-reduces in flight.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "launcher/run_process.h"
#include "support/spawn.h"

using weft::test::dump;
using weft::test::run_job;

namespace {

void expect_ok(const std::vector<weft::test::RankResult>& rs, const std::string& what, int skip = -1) {
  for (size_t r = 0; r < rs.size(); ++r) {
    if (static_cast<int>(r) == skip) continue;
    EXPECT_EQ(rs[r].status, 0) << dump(rs);
    EXPECT_NE(rs[r].output.find("OK " + what), std::string::npos) << dump(rs);
  }
}

class InFlight : public ::testing::TestWithParam<const char*> {
 protected:
  std::vector<std::string> env(std::vector<std::string> more = {}) const {
    more.push_back(std::string("WEFT_TRANSPORT=") + GetParam());
    more.push_back("WEFT_TIMEOUT_MS=30000");
    return more;
  }
};

TEST_P(InFlight, ReceivesPostedBeforeSends) {
  for (int n : {2, 3}) expect_ok(run_job(n, {WEFT_TEST_INFLIGHT, "recv-first"}, env(), std::chrono::seconds(90)), "recv-first");
}

TEST_P(InFlight, MessagesAroundARingInMixedOrders) {
  expect_ok(run_job(3, {WEFT_TEST_INFLIGHT, "ring", "64"}, env(), std::chrono::seconds(90)), "ring 64");
}

TEST_P(InFlight, ReceiveFromAnySource) {
  for (int n : {2, 4}) expect_ok(run_job(n, {WEFT_TEST_INFLIGHT, "any-source"}, env(), std::chrono::seconds(90)), "any-source");
}

TEST_P(InFlight, TwoCommunicatorsWaitedInOppositeOrders) {
  expect_ok(run_job(2, {WEFT_TEST_INFLIGHT, "two-comms"}, env(), std::chrono::seconds(90)), "two-comms");
}

// The flight recorder of rank 0 shows the asynchronous all-reduces overlapping: one starts before
// another has finished.
TEST_P(InFlight, AsyncAllReducesOverlapInTime) {
  const auto dir = std::filesystem::temp_directory_path() / ("weft-inflight-" + std::to_string(::getpid()) + GetParam());
  std::filesystem::remove_all(dir);
  auto rs = run_job(2, {WEFT_TEST_INFLIGHT, "overlap", "8"}, env({"WEFT_DUMP_DIR=" + dir.string()}), std::chrono::seconds(90));
  expect_ok(rs, "overlap 8");
  std::ifstream f(dir / "rank0.json");
  ASSERT_TRUE(f.good()) << "no flight recorder dump in " << dir;
  const auto j = nlohmann::json::parse(f);
  std::vector<std::pair<double, double>> spans;
  for (const auto& c : j["communicators"])
    for (const auto& op : c["ops"])
      if (op["collective"] == "allreduce" && op["state"] == "done")
        spans.emplace_back(op["started_us"].get<double>(), op["finished_us"].get<double>());
  ASSERT_GE(spans.size(), 16u) << j.dump(1);
  int overlapping = 0;
  for (size_t a = 0; a < spans.size(); ++a)
    for (size_t b = a + 1; b < spans.size(); ++b)
      if (spans[a].first < spans[b].second && spans[b].first < spans[a].second) ++overlapping;
  std::printf("[ figure ] WEFT_TRANSPORT=%s: %d overlapping pairs of %zu all-reduces\n", GetParam(), overlapping, spans.size());
  EXPECT_GE(overlapping, 8) << j.dump(1);
  std::filesystem::remove_all(dir);
}

// A rank exits with 8 all-reduces in flight: every one fails on every survivor within the
// timeout, and weftCommShrink works afterwards.
TEST_P(InFlight, ADeadPeerFailsEveryOperationInFlight) {
  auto rs = run_job(3, {WEFT_TEST_INFLIGHT, "fault"}, env({"WEFT_TIMEOUT_MS=20000"}), std::chrono::seconds(90));
  expect_ok(rs, "fault", 1);
}

INSTANTIATE_TEST_SUITE_P(Transports, InFlight, ::testing::Values("auto", "ucx"));

// weft-doctor names a point-to-point deadlock (each rank waiting in a receive whose send was never
// posted): it said "no problem found".
TEST(Doctor, NamesAPointToPointDeadlock) {
  const auto dir = std::filesystem::temp_directory_path() / ("weft-p2p-dead-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto rs = run_job(3, {WEFT_TEST_INFLIGHT, "p2p-deadlock"}, {"WEFT_TIMEOUT_MS=1500", "WEFT_DUMP_DIR=" + dir.string()},
                    std::chrono::seconds(60));
  expect_ok(rs, "p2p-deadlock");
  auto doc = weft::test::run_process({WEFT_DOCTOR_PATH, dir.string()}, 30);
  const std::string out = doc.out + doc.err;
  EXPECT_EQ(doc.status, 1) << out;  // a problem found
  EXPECT_NE(out.find("point-to-point deadlock"), std::string::npos) << out;
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(out.find("rank " + std::to_string(r) + " waits in recv #0 from rank " + std::to_string((r + 1) % 3)),
              std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

// After a failed job weftrun runs weft-doctor over the dumps the job wrote and prints its finding.
TEST(Doctor, WeftrunRunsItAfterAFailedJob) {
  auto f = weft::test::run_process({WEFTRUN_PATH, "-np", "3", "-x", "WEFT_TEST_FAIL_EXIT=1", "-x", "WEFT_TIMEOUT_MS=1500",
                                    WEFT_TEST_INFLIGHT, "p2p-deadlock"}, 60);
  EXPECT_NE(f.status, 0) << f.out << f.err;
  EXPECT_NE(f.err.find("weftrun: weft-doctor "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("point-to-point deadlock on the world communicator"), std::string::npos) << f.err;
}

// WEFT_LOG_LEVEL=info: the algorithm log's line for each size class (which algorithm, why) and,
// after 10 more calls, the measured time against the cost model's prediction.
TEST(AlgorithmLog, NamesTheAlgorithmThenItsMeasuredTime) {
  auto rs = run_job(2, {WEFT_TEST_INFLIGHT, "algo-log"}, {"WEFT_LOG_LEVEL=info"}, std::chrono::seconds(60));
  expect_ok(rs, "algo-log");
  const std::string& out = rs[0].output;
  EXPECT_NE(out.find("algorithm 'direct' for allreduce"), std::string::npos) << out;
  EXPECT_NE(out.find("the shared-memory latency path"), std::string::npos) << out;
  EXPECT_NE(out.find("algorithm 'direct' measured"), std::string::npos) << out;
  EXPECT_NE(out.find("(mean of 10 calls after the first"), std::string::npos) << out;
  // The 4 MiB class runs a schedule of the table, with the cost model's prediction beside it.
  std::smatch m;
  EXPECT_TRUE(std::regex_search(out, m, std::regex("4194304-8388607 B: algorithm '(ring|tree|rhd)' measured [0-9.]+ us .* against "
                                                   "[0-9.]+ us predicted"))) << out;
}

// A forced algorithm applies to the collectives that have it: WEFT_ALGO=chain (broadcast, reduce)
// leaves the all-reduce on the shared-memory latency path ("direct"; it turned that path off).
TEST(AlgorithmScope, ForcedAlgorithmAppliesOnlyToItsCollectives) {
  auto rs = run_job(2, {WEFT_TEST_INFLIGHT, "algo-scope"}, {"WEFT_ALGO=chain"}, std::chrono::seconds(60));
  expect_ok(rs, "algo-scope direct");
}

// Size ranges per collective (issue 43): WEFT_ALGO=allreduce:0-32K:direct,32K-:ring runs the
// native row below 32 KiB and the ring above (weftCommLastAlgorithm on every rank, and the
// algorithm log at info names both, forced); weftCommSetAlgorithm takes ranges too.
TEST(AlgorithmScope, SizeRangesChooseWhatRuns) {
  auto rs = run_job(2, {WEFT_TEST_INFLIGHT, "algo-ranges"}, {"WEFT_ALGO=allreduce:0-32K:direct,32K-:ring", "WEFT_LOG_LEVEL=info"},
                    std::chrono::seconds(60));
  expect_ok(rs, "algo-ranges");
  const std::string& out = rs[0].output;
  EXPECT_NE(out.find("WEFT_ALGO=allreduce:0-32K:direct,32K-:ring forced for allreduce (0 B-32 KiB: direct, 32 KiB-: ring)"),
            std::string::npos) << out;
  EXPECT_NE(out.find("32-63 B: algorithm 'direct' for allreduce"), std::string::npos) << out;
  EXPECT_NE(out.find("65536-131071 B: algorithm 'ring' for allreduce"), std::string::npos) << out;
  EXPECT_NE(out.find("forced by WEFT_ALGO / weftCommSetAlgorithm ('ring')"), std::string::npos) << out;
}

// A bad WEFT_ALGO spec fails the communicator's creation at once, with a message naming the problem
// (weftrun stops the other ranks).
TEST(AlgorithmScope, BadSpecIsRefusedClearly) {
  auto f = weft::test::run_process({WEFTRUN_PATH, "-np", "2", "-x", "WEFT_ALGO=allreduce:32K-0:ring", WEFT_TEST_INFLIGHT,
                                    "algo-ranges"}, 60);
  EXPECT_NE(f.status, 0) << f.out << f.err;
  EXPECT_NE((f.out + f.err).find("WEFT_ALGO 'allreduce:32K-0:ring': the range '32K-0' is empty"), std::string::npos)
      << f.out << f.err;
}

}  // namespace
