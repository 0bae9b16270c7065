// Real processes, launched by plain WEFT_* variables (no MPI), talking over UCX.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "launcher/run_process.h"
#include "runtime/transport/shm/shm_transport.h"
#include "support/spawn.h"

using weft::test::dump;
using weft::test::run_job;

namespace {

class Processes : public ::testing::TestWithParam<int> {};

TEST_P(Processes, CollectivesAreCorrect) {
  auto rs = run_job(GetParam(), {WEFT_TEST_RANK, "check"});
  for (size_t r = 0; r < rs.size(); ++r) {
    EXPECT_EQ(rs[r].status, 0) << dump(rs);
    EXPECT_NE(rs[r].output.find("OK"), std::string::npos) << dump(rs);
  }
}
INSTANTIATE_TEST_SUITE_P(Ranks, Processes, ::testing::Values(2, 3, 4));

// An idle communicator (after blocking and asynchronous calls) uses under 1% of a core: nothing
// polls while nothing is asked of it (issue: progress engine, "Threads").
class Idle : public ::testing::TestWithParam<const char*> {};
TEST_P(Idle, AnIdleCommunicatorCostsNoCpu) {
  auto rs = run_job(3, {WEFT_TEST_RANK, "idle"}, {std::string("WEFT_TRANSPORT=") + GetParam()});
  for (size_t r = 0; r < rs.size(); ++r) {
    EXPECT_EQ(rs[r].status, 0) << dump(rs);
    EXPECT_NE(rs[r].output.find("IDLE"), std::string::npos) << dump(rs);
  }
  std::printf("[ figure ] WEFT_TRANSPORT=%s %s", GetParam(), rs[0].output.substr(rs[0].output.find("rank 0: IDLE")).c_str());
}
INSTANTIATE_TEST_SUITE_P(Transports, Idle, ::testing::Values("auto", "ucx"));

// weftCommSplitLevel: 4 ranks as 2 nodes of 2, and 5 as nodes of 2, 2 and 1 (uneven rails).
TEST(Levels, NodeAndRailCommunicators) {
  for (int n : {4, 5}) {
    auto rs = run_job(n, {WEFT_TEST_RANK, "levels"});
    for (size_t r = 0; r < rs.size(); ++r) {
      EXPECT_EQ(rs[r].status, 0) << dump(rs);
      EXPECT_NE(rs[r].output.find("OK levels"), std::string::npos) << dump(rs);
    }
  }
}

// Every survivor of a failure must get an error (not hang) well within the timeout.
// Time to error: each survivor prints "rank R: ERROR <code> <ms> <message>"; the figures are
// printed for docs/RELIABILITY.md. After the error each rank checked that the next call fails at
// once with the same cause ("AFTER"; its exit status says whether that held).
// When the killed rank printed "KILL at <ms>" (system clock), each survivor's "ERROR at <ms>" must
// come within max_ms_after_kill of it (if given): the time a user waits, counted from the death.
void expect_all_error(const std::vector<weft::test::RankResult>& rs, int skip_rank, double max_seconds,
                      const char* label = nullptr, double max_ms_after_kill = 0) {
  const std::string name = label ? label : ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::smatch killed;
  const bool kill_seen = skip_rank >= 0 && std::regex_search(rs[static_cast<size_t>(skip_rank)].output, killed, std::regex("KILL at (\\d+)"));
  if (max_ms_after_kill > 0) {
    EXPECT_TRUE(kill_seen) << "the killed rank did not report its kill time\n" << dump(rs);
  }
  for (size_t r = 0; r < rs.size(); ++r) {
    if (static_cast<int>(r) == skip_rank) continue;
    std::smatch at;
    if (kill_seen && std::regex_search(rs[r].output, at, std::regex("ERROR at (\\d+)"))) {
      const long long after = std::stoll(at[1].str()) - std::stoll(killed[1].str());
      std::printf("[ figure ] %s rank %zu: error %lld ms after the kill\n", name.c_str(), r, after);
      if (max_ms_after_kill > 0) {
        EXPECT_LT(static_cast<double>(after), max_ms_after_kill) << dump(rs);
      }
    } else if (max_ms_after_kill > 0) {
      ADD_FAILURE() << "rank " << r << " reported no error time\n" << dump(rs);
    }
    EXPECT_EQ(rs[r].status, 0) << dump(rs);
    EXPECT_NE(rs[r].output.find("ERROR"), std::string::npos) << dump(rs);
    EXPECT_NE(rs[r].output.find("AFTER"), std::string::npos) << "no check after the error\n" << dump(rs);
    EXPECT_LT(rs[r].seconds, max_seconds) << dump(rs);
    std::smatch m;
    if (std::regex_search(rs[r].output, m, std::regex("ERROR (\\d+) (\\d+) "))) {
      std::printf("[ figure ] %s rank %zu: result %s after %s ms\n", name.c_str(), r, m[1].str().c_str(), m[2].str().c_str());
    }
  }
}

// Every survivor's result is one of the codes allowed.
void expect_codes(const std::vector<weft::test::RankResult>& rs, int skip_rank, std::vector<int> codes) {
  for (size_t r = 0; r < rs.size(); ++r) {
    if (static_cast<int>(r) == skip_rank) continue;
    bool ok = false;
    for (int c : codes) ok |= rs[r].output.find("ERROR " + std::to_string(c) + " ") != std::string::npos;
    EXPECT_TRUE(ok) << "rank " << r << ": unexpected result code\n" << dump(rs);
  }
}

// The transport each survivor's communicator reported ("communicator ready: ... transport X" at
// WEFT_LOG_LEVEL=info) is the one asked for: WEFT_TRANSPORT=ucx gives UCX; auto gives Weft's shared
// memory wherever cross-memory attach works (kernel.yama.ptrace_scope 0), UCX otherwise. So
// which transport a fault test covered never silently depends on a sysctl.
void expect_transport(const std::vector<weft::test::RankResult>& rs, int skip_rank, const std::string& asked) {
  const std::string want = asked == "ucx" || !weft::ShmTransport::usable() ? "ucx" : "shm";
  for (size_t r = 0; r < rs.size(); ++r) {
    if (static_cast<int>(r) == skip_rank) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(rs[r].output, m, std::regex("communicator ready: .* transport (\\S+)"))) << dump(rs);
    EXPECT_EQ(m[1].str(), want) << "WEFT_TRANSPORT=" << asked << "\n" << dump(rs);
  }
}

class FaultsOver : public ::testing::TestWithParam<const char*> {
 protected:
  std::vector<std::string> env(const char* timeout_ms) const {
    return {std::string("WEFT_TIMEOUT_MS=") + timeout_ms, std::string("WEFT_TRANSPORT=") + GetParam(), "WEFT_LOG_LEVEL=info"};
  }
};

TEST_P(FaultsOver, KilledRankIsAnErrorOnEverySurvivor) {
  auto rs = run_job(3, {WEFT_TEST_RANK, "die"}, env("20000"));
  expect_transport(rs, 1, GetParam());
  EXPECT_EQ(rs[1].status, 128 + SIGKILL) << dump(rs);
  expect_all_error(rs, 1, 15.0, nullptr, 20000 + 2000);  // within the timeout, counted from the kill
  expect_codes(rs, 1, {4, 5});  // weftRemoteError or weftTimeout
}

// The same in small calls, which take the shared-memory latency path: its waits ask whether the
// peer's process is gone, so the survivors fail in milliseconds rather than at the timeout.
TEST(Faults, KilledRankInSmallCallsIsAnErrorOnEverySurvivor) {
  auto rs = run_job(3, {WEFT_TEST_RANK, "die-small"}, {"WEFT_TIMEOUT_MS=20000", "WEFT_LOG_LEVEL=info"});
  expect_transport(rs, 1, "auto");
  EXPECT_EQ(rs[1].status, 128 + SIGKILL) << dump(rs);
  expect_all_error(rs, 1, 10.0, nullptr, 5000);  // a quarter of the 20 s timeout, with room for sanitizers
  expect_codes(rs, 1, {4});  // weftRemoteError: the dead rank is named, not a timeout
}

TEST(Faults, KilledRankInALargeAllReduceUnderWeftrunNamesTheRank) {
  // 4 ranks; rank 1 SIGKILLs itself 300 ms into a loop of 32 MiB all-reduces. weftrun must exit
  // non-zero and name rank 1; it stops the survivors itself (SIGTERM), well within the timeout.
  auto f = weft::test::run_process({WEFTRUN_PATH, "-np", "4", "--bind", "none", WEFT_TEST_RANK, "die"}, 60);
  EXPECT_FALSE(f.timed_out);
  EXPECT_NE(f.status, 0) << f.err;
  EXPECT_NE(f.err.find("rank 1"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("signal 9"), std::string::npos) << f.err;
  EXPECT_LT(f.seconds, 20.0);
  std::printf("[ figure ] weftrun with rank 1 killed: exit %d after %.1f s\n", f.status, f.seconds);
}

TEST_P(FaultsOver, KilledRankWithShortTimeoutEverySurvivorWithinTheTimeout) {
  // 4 ranks, WEFT_TIMEOUT_MS=3000: whatever detects the death (store notice, UCX, timeout), every
  // survivor must return within the timeout plus teardown.
  auto rs = run_job(4, {WEFT_TEST_RANK, "die"}, env("3000"));
  expect_transport(rs, 1, GetParam());
  EXPECT_EQ(rs[1].status, 128 + SIGKILL) << dump(rs);
  expect_all_error(rs, 1, 12.0, nullptr, 3000 + 1500);  // the 3 s timeout, counted from the kill, plus slack
  expect_codes(rs, 1, {4, 5});
}
INSTANTIATE_TEST_SUITE_P(Transports, FaultsOver, ::testing::Values("auto", "ucx"));

TEST(Faults, AbsentRankIsATimeout) {
  auto rs = run_job(2, {WEFT_TEST_RANK, "absent"}, {"WEFT_TIMEOUT_MS=2000"});
  expect_all_error(rs, 1, 25.0);
  EXPECT_NE(rs[0].output.find("ERROR 5"), std::string::npos) << "expected weftTimeout\n" << dump(rs);
  EXPECT_NE(rs[0].output.find("waiting for rank 1"), std::string::npos) << dump(rs);
}

TEST(Faults, MismatchedCountIsNamedOnEveryRank) {
  auto rs = run_job(3, {WEFT_TEST_RANK, "mismatch"}, {"WEFT_TIMEOUT_MS=20000"});
  expect_all_error(rs, -1, 15.0);
  bool named = false;
  for (auto& r : rs) {
    named |= r.output.find("mismatch with rank") != std::string::npos;
    EXPECT_NE(r.output.find("the count"), std::string::npos) << "every rank's message names the field\n" << dump(rs);
  }
  EXPECT_TRUE(named) << dump(rs);
}

TEST(Faults, AbortFromAnotherThreadReleasesTheWait) {
  auto rs = run_job(2, {WEFT_TEST_RANK, "abort"}, {"WEFT_TIMEOUT_MS=20000"});
  EXPECT_EQ(rs[0].status, 0) << dump(rs);
  EXPECT_NE(rs[0].output.find("ERROR"), std::string::npos) << dump(rs);
  EXPECT_LT(rs[0].seconds, 10.0) << dump(rs);
  EXPECT_NE(rs[0].output.find("AFTER"), std::string::npos) << dump(rs);
}

TEST(Faults, AbortFromAnotherThreadReleasesAsyncRequests) {
  auto rs = run_job(2, {WEFT_TEST_RANK, "abort-async"}, {"WEFT_TIMEOUT_MS=20000"});
  EXPECT_EQ(rs[0].status, 0) << dump(rs);
  EXPECT_NE(rs[0].output.find("3 of 3 requests released"), std::string::npos) << dump(rs);
  EXPECT_LT(rs[0].seconds, 10.0) << dump(rs);
  expect_all_error(rs, 1, 10.0);
}

TEST(Faults, UsableAfterAnArgumentError) {
  auto rs = run_job(3, {WEFT_TEST_RANK, "argerror"}, {"WEFT_TIMEOUT_MS=20000"});
  for (auto& r : rs) {
    EXPECT_EQ(r.status, 0) << dump(rs);
    EXPECT_NE(r.output.find("ARG 1 "), std::string::npos) << dump(rs);
    EXPECT_NE(r.output.find("OK usable"), std::string::npos) << dump(rs);
  }
}

// ---- Flight recorder (docs/OBSERVABILITY.md) ----------------------------------------------------

// A fresh, empty folder for a job's dumps.
std::string dump_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("weft-test-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

nlohmann::json read_dump(const std::string& dir, int rank) {
  std::ifstream f(dir + "/rank" + std::to_string(rank) + ".json");
  if (!f) return nullptr;
  return nlohmann::json::parse(f, nullptr, false);
}

// `weft-doctor --json dir`: exit status 1 (a problem found) and exactly one finding, returned.
nlohmann::json doctor_finding(const std::string& dir) {
  auto js = weft::test::run_process({WEFT_DOCTOR_PATH, "--json", dir}, 30);
  EXPECT_EQ(js.status, 1) << js.err;
  const auto j = nlohmann::json::parse(js.out, nullptr, false);
  if (!j.is_object() || j.at("findings").size() != 1) {
    ADD_FAILURE() << "expected one finding:\n" << js.out << js.err;
    return nlohmann::json::object();
  }
  return j.at("findings")[0];
}

// The world communicator's operations in a rank's dump.
nlohmann::json world_ops(const nlohmann::json& dump) {
  for (const auto& c : dump.at("communicators"))
    if (c.at("name") == "world") return c.at("ops");
  return nlohmann::json::array();
}

TEST(FlightRecorder, EveryRankDumpsWhenOneSkipsACollective) {
  const std::string dir = dump_dir("skip");
  auto rs = run_job(3, {WEFT_TEST_RANK, "skip"}, {"WEFT_TIMEOUT_MS=1500", "WEFT_DUMP_DIR=" + dir});
  for (auto& r : rs) EXPECT_EQ(r.status, 0) << dump(rs);
  for (int r = 0; r < 3; ++r) {
    const auto d = read_dump(dir, r);
    ASSERT_TRUE(d.is_object()) << "rank " << r << " wrote no dump\n" << dump(rs);
    EXPECT_EQ(d.at("world_rank"), r);
    const auto ops = world_ops(d);
    ASSERT_FALSE(ops.empty()) << d.dump(1);
    const auto& last = ops.back();
    EXPECT_EQ(last.at("collective"), "allreduce");
    EXPECT_EQ(last.at("count"), 1024);
    if (r == 2) {
      // It never called #4: its last is #3, done.
      EXPECT_EQ(last.at("seq"), 3) << d.dump(1);
      EXPECT_EQ(last.at("state"), "done") << d.dump(1);
    } else {
      EXPECT_EQ(last.at("seq"), 4) << d.dump(1);
      EXPECT_EQ(last.at("state"), "failed") << d.dump(1);
      EXPECT_EQ(last.at("error"), "timeout") << d.dump(1);
      EXPECT_EQ(last.at("algorithm"), "direct") << d.dump(1);
      EXPECT_NE(rs[r].output.find("flight recorder: " + dir), std::string::npos) << "the error names the dump\n" << dump(rs);
      EXPECT_EQ(last.at("waiting_on").at("rank"), 2) << d.dump(1);
    }
  }
  // weft-doctor names the rank that never called #4, and whom the others waited for.
  auto doc = weft::test::run_process({WEFT_DOCTOR_PATH, dir}, 30);
  EXPECT_EQ(doc.status, 1) << doc.out << doc.err;
  EXPECT_NE(doc.out.find("allreduce #4 (1024 float32, sum) on the world communicator: ranks 0, 1 started it and waited for rank 2"),
            std::string::npos) << doc.out;
  EXPECT_NE(doc.out.find("rank 2 never called it (its last was allreduce #3"), std::string::npos) << doc.out;
  const auto f = doctor_finding(dir);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f.at("kind"), "not_called");
  EXPECT_EQ(f.at("seq"), 4);
  EXPECT_EQ(f.at("missing"), nlohmann::json::array({2}));
  EXPECT_EQ(f.at("started"), nlohmann::json::array({0, 1}));
  std::printf("[ figure ] weft-doctor: %s", doc.out.c_str());
  std::filesystem::remove_all(dir);
}

// A count mismatch is named as one, with the odd rank and the field.
TEST(FlightRecorder, DoctorNamesACountMismatch) {
  const std::string dir = dump_dir("mismatch");
  auto rs = run_job(3, {WEFT_TEST_RANK, "mismatch-small"}, {"WEFT_TIMEOUT_MS=5000", "WEFT_DUMP_DIR=" + dir});
  for (auto& r : rs) EXPECT_NE(r.output.find("ERROR 2 "), std::string::npos) << dump(rs);
  const auto f = doctor_finding(dir);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f.at("kind"), "mismatch") << f.dump();
  EXPECT_EQ(f.at("seq"), 4);
  EXPECT_EQ(f.at("odd"), nlohmann::json::array({1})) << f.dump();
  EXPECT_EQ(f.at("fields"), nlohmann::json::array({"count"})) << f.dump();
  EXPECT_NE(f.at("sentence").get<std::string>().find("rank 1 called allreduce #4 (1023 float32, sum)"), std::string::npos) << f.dump();
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorder, WeftCommDumpAndSigusr1WriteTheDump) {
  const std::string dir = dump_dir("dump");
  auto rs = run_job(2, {WEFT_TEST_RANK, "dump"}, {"WEFT_DUMP_DIR=" + dir});
  for (auto& r : rs) {
    EXPECT_EQ(r.status, 0) << dump(rs);
    EXPECT_NE(r.output.find("OK dump"), std::string::npos) << dump(rs);
  }
  const auto d = read_dump(dir, 1);
  ASSERT_TRUE(d.is_object());
  EXPECT_EQ(d.at("reason"), "SIGUSR1");
  // Three all-reduces and a barrier, all done, in order.
  const auto ops = world_ops(d);
  ASSERT_GE(ops.size(), 4u) << d.dump(1);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(ops[i].at("seq"), i);
    EXPECT_EQ(ops[i].at("state"), "done");
    EXPECT_GT(ops[i].at("finished_us").get<double>(), 0);
  }
  EXPECT_EQ(ops[3].at("collective"), "barrier");
  std::filesystem::remove_all(dir);
}

// ---- Metrics (docs/OBSERVABILITY.md) -------------------------------------------------------------

// `promtool check metrics < path` (Debian's prometheus package): "" when it passes, else its words.
std::string promtool(const std::string& path) {
  auto p = weft::test::run_process({"/bin/sh", "-c", std::string(WEFT_PROMTOOL) + " check metrics < '" + path + "'"}, 30);
  return p.status == 0 ? "" : "promtool failed (" + std::to_string(p.status) + "): " + p.out + p.err;
}

// The sum of the samples `name{labels...}` whose label sets contain every one of `with`; -1 when none.
double sample(const std::string& text, const std::string& name, const std::vector<std::string>& with) {
  std::istringstream in(text);
  double sum = -1;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + "{", 0) != 0) continue;
    bool all = true;
    for (const auto& w : with) all &= line.find(w) != std::string::npos;
    if (all) sum = std::max(sum, 0.0) + std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

TEST(Metrics, FileAndEndpointPassPromtoolAndCountTheCalls) {
  if (std::string(WEFT_PROMTOOL).empty()) GTEST_SKIP() << "promtool not found (scripts/setup installs prometheus)";
  const std::string dir = dump_dir("metrics");
  const int port = weft::test::free_port();
  auto rs = run_job(2, {WEFT_TEST_RANK, "metrics", dir},
                    {"WEFT_METRICS_FILE=" + dir + "/weft.prom", "WEFT_METRICS_PORT=" + std::to_string(port)});
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(rs[r].status, 0) << dump(rs);
    const std::string rank = "rank=\"" + std::to_string(r) + "\"";
    // The endpoint, read after 9 all-reduces and 3 barriers.
    const std::string http = dir + "/http." + std::to_string(r) + ".prom";
    EXPECT_EQ(promtool(http), "");
    const std::string h = read_text(http);
    const double small = sample(h, "weft_collective_calls_total", {rank, "collective=\"allreduce\"", "algorithm=\"direct\""});
    const double all = sample(h, "weft_collective_calls_total", {rank, "collective=\"allreduce\""});
    EXPECT_EQ(small, 7) << h;
    EXPECT_EQ(all, 9) << h;
    EXPECT_EQ(sample(h, "weft_collective_calls_total", {rank, "collective=\"barrier\""}), 3) << h;
    EXPECT_EQ(sample(h, "weft_collective_latency_seconds_count", {rank, "collective=\"allreduce\"", "algorithm=\"direct\""}), 7) << h;
    EXPECT_EQ(sample(h, "weft_collective_bytes_total", {rank, "collective=\"allreduce\""}), 7 * 64 + 2.0 * (8 << 20)) << h;
    EXPECT_GT(sample(h, "weft_collective_busbw_bytes", {rank, "collective=\"allreduce\""}), 0) << h;
    // The file, written when the communicator went: the reducer's two steps too.
    const std::string file = dir + "/weft." + std::to_string(r) + ".prom";
    EXPECT_EQ(promtool(file), "");
    const std::string t = read_text(file);
    EXPECT_EQ(sample(t, "weft_steps_total", {rank, "source=\"reducer\""}), 2) << t;
    const double share = sample(t, "weft_step_sync_share", {rank, "source=\"reducer\""});
    EXPECT_GE(share, 0) << t;
    EXPECT_LE(share, 1) << t;
    EXPECT_EQ(sample(t, "weft_collective_calls_total", {rank, "collective=\"barrier\""}), 3 + 1) << t;  // and the one before the reducer
  }
  std::filesystem::remove_all(dir);
}

TEST(Bootstrap, MissingEnvironmentIsAClearError) {
  auto rs = run_job(1, {WEFT_TEST_RANK, "check"}, {"WEFT_JOB_SECRET="});
  EXPECT_EQ(rs[0].status, 2) << dump(rs);
  EXPECT_NE(rs[0].output.find("WEFT_JOB_SECRET"), std::string::npos) << dump(rs);
}

TEST(Bootstrap, WrongOrMissingSecretIsRefused) {
  // Rank 1 presents another job's secret, or none: rank 0's store refuses the first, and the
  // second fails before it connects; either way rank 1 fails naming WEFT_JOB_SECRET, and rank 0,
  // left waiting for a rank that never joins, fails within its 3 s timeout instead of hanging.
  // Neither gets as far as a collective.
  for (const char* secret : {"WEFT_JOB_SECRET=another-jobs-secret", "WEFT_JOB_SECRET="}) {
    SCOPED_TRACE(secret);
    auto rs = run_job(2, {WEFT_TEST_RANK, "check"}, {"WEFT_TIMEOUT_MS=3000"}, std::chrono::seconds(60), {{1, secret}});
    EXPECT_NE(rs[1].status, 0) << dump(rs);
    EXPECT_NE(rs[1].output.find("WEFT_JOB_SECRET"), std::string::npos) << dump(rs);
    EXPECT_NE(rs[0].status, 0) << dump(rs);
    EXPECT_LT(rs[0].seconds, 15.0) << dump(rs);
    for (auto& r : rs) EXPECT_EQ(r.output.find(": OK"), std::string::npos) << dump(rs);
  }
}

}  // namespace
