// Real processes, launched by plain WEFT_* variables (no MPI), talking over UCX.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "launcher/mpi_command.h"
#include "launcher/run_process.h"
#include "runtime/transport/shm/shm_transport.h"
#include "support/spawn.h"
#include "support/spawn_store.h"

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

// weftCommShrink after a real death (docs/RELIABILITY.md, "Shrink"): rank 2 of 4 SIGKILLs itself
// in a loop of all-reduces; each survivor catches the error, shrinks with NULL (the ranks that
// failed, agreed) and must get ranks 0, 1, 3 as 0, 1, 2: checked through the new communicator (an
// all-gather of their old ranks, then a 1M-element all-reduce), rank 2 reported by
// weftCommGetFailedRanks. The time from the kill to the first collective that succeeds on the
// new communicator is printed (KILL at / FIRST at, system clock). Rank 0 serves the store here
// (plain WEFT_* variables): the death of rank 0 itself is ShrinkProcesses.UnderWeftrun*.
std::vector<long long> shrink_figures(const std::vector<weft::test::RankResult>& rs, const std::vector<int>& victims,
                                      const char* label) {
  std::smatch k;
  long long kill_at = -1;
  for (int v : victims)
    if (std::regex_search(rs[static_cast<size_t>(v)].output, k, std::regex("KILL at (\\d+)"))) kill_at = std::stoll(k[1].str());
  std::vector<long long> after;
  for (size_t r = 0; r < rs.size(); ++r) {
    std::smatch f;
    if (kill_at < 0 || !std::regex_search(rs[r].output, f, std::regex("FIRST at (\\d+)"))) continue;
    after.push_back(std::stoll(f[1].str()) - kill_at);
    std::printf("[ figure ] %s rank %zu: first collective on the shrunk communicator %lld ms after the kill\n", label, r,
                after.back());
  }
  return after;
}

TEST(ShrinkProcesses, SurvivorsOfAKilledRankShrinkAndGoOn) {
  auto rs = run_job(4, {WEFT_TEST_RANK, "shrink", "2"}, {"WEFT_TIMEOUT_MS=20000"});
  EXPECT_EQ(rs[2].status, 128 + SIGKILL) << dump(rs);
  for (int r : {0, 1, 3}) {
    const std::string& out = rs[static_cast<size_t>(r)].output;
    EXPECT_EQ(rs[static_cast<size_t>(r)].status, 0) << dump(rs);
    EXPECT_NE(out.find("OK shrunk"), std::string::npos) << dump(rs);
    EXPECT_NE(out.find(fmt::format("SHRUNK to rank {} of 3", r == 3 ? 2 : r)), std::string::npos) << dump(rs);
    EXPECT_NE(out.find("FAILED-RANK 2"), std::string::npos) << dump(rs);
  }
  for (long long ms : shrink_figures(rs, {2}, "4 ranks, rank 2 killed")) EXPECT_LT(ms, 10000) << dump(rs);
}

// Each survivor: exit 0, "OK shrunk", its dense rank in the group of `survivors` (old ranks).
void expect_shrunk(const std::vector<weft::test::RankResult>& rs, const std::vector<int>& survivors) {
  for (size_t i = 0; i < survivors.size(); ++i) {
    const auto& res = rs[static_cast<size_t>(survivors[i])];
    EXPECT_EQ(res.status, 0) << dump(rs);
    EXPECT_NE(res.output.find("OK shrunk"), std::string::npos) << dump(rs);
    EXPECT_NE(res.output.find(fmt::format("SHRUNK to rank {} of {}", i, survivors.size())), std::string::npos) << dump(rs);
  }
}

// Rank 0 dies, with the store served outside the ranks (by this test, as weftrun serves it):
// the survivors 1, 2, 3 become 0, 1, 2 and go on.
TEST(ShrinkProcesses, Rank0DiesWithTheStoreOutsideTheRanks) {
  auto rs = weft::test::run_job_store_outside(4, {WEFT_TEST_RANK, "shrink", "0"}, {"WEFT_TIMEOUT_MS=20000"});
  EXPECT_EQ(rs[0].status, 128 + SIGKILL) << dump(rs);
  expect_shrunk(rs, {1, 2, 3});
  for (long long ms : shrink_figures(rs, {0}, "4 ranks, rank 0 killed (store outside)")) EXPECT_LT(ms, 10000) << dump(rs);
}

// The same under weftrun --keep-going, which serves the store itself: rank 0 dies, weftrun names
// it and keeps the others running, they shrink and finish, and weftrun exits 75 (the job finished
// on the survivors).
TEST(ShrinkProcesses, UnderWeftrunKeepGoingRank0DiesAndTheOthersFinish) {
  auto f = weft::test::run_process({WEFTRUN_PATH, "-np", "4", "--bind", "none", "--keep-going", "--tag-output", WEFT_TEST_RANK,
                                    "shrink", "0"},
                                   60);
  EXPECT_FALSE(f.timed_out);
  EXPECT_EQ(f.status, 75) << f.err << f.out;
  EXPECT_TRUE(std::regex_search(f.err, std::regex("rank 0 \\(pid [0-9]+\\) was killed by signal 9"))) << f.err;
  EXPECT_NE(f.err.find("3 of 4 ranks finished with status 0"), std::string::npos) << f.err;
  for (int r = 1; r < 4; ++r) {
    EXPECT_NE(f.out.find(fmt::format("[{}] rank {}: OK shrunk", r, r)), std::string::npos) << f.out;
    EXPECT_NE(f.out.find(fmt::format("[{}] rank {}: SHRUNK to rank {} of 3", r, r, r - 1)), std::string::npos) << f.out;
  }
}

// The same through Open MPI (weftrun --mpi openmpi): weftrun serves the store there too and asks
// mpirun to keep going (--enable-recovery); mpirun then exits 0, and weftrun learns of rank 0's
// death from the store's notice, names it and exits 75.
TEST(ShrinkProcesses, UnderWeftrunThroughOpenMpiRank0DiesAndTheOthersFinish) {
  const std::string mpirun = weft::launcher::find_on_path("mpirun");
  if (mpirun.empty() || weft::launcher::detect_mpi_flavor(mpirun) != weft::launcher::MpiFlavor::kOpenMpi)
    GTEST_SKIP() << "Open MPI's mpirun is not on PATH";
  auto f = weft::test::run_process({WEFTRUN_PATH, "-np", "4", "--mpi", "openmpi", "--bind", "none", "--keep-going", WEFT_TEST_RANK,
                                    "shrink", "0"},
                                   120);
  EXPECT_FALSE(f.timed_out);
  EXPECT_EQ(f.status, 75) << f.err << f.out;
  EXPECT_TRUE(std::regex_search(f.err, std::regex("rank 0 \\(pid [0-9]+ on [^)]+\\) died"))) << f.err;
  for (int r = 1; r < 4; ++r) {
    EXPECT_NE(f.out.find(fmt::format("rank {}: OK shrunk", r)), std::string::npos) << f.out;
    EXPECT_NE(f.out.find(fmt::format("rank {}: SHRUNK to rank {} of 3", r, r - 1)), std::string::npos) << f.out;
  }
}

// 20 consecutive failures and shrinks (an abort, nobody lost) in 4 processes: every new
// communicator works, and from cycle 2 (warm) to cycle 20 no descriptor and under 2 MiB of
// resident memory per process are left behind (transports, segments, threads, store notices).
TEST(ShrinkProcesses, TwentyConsecutiveShrinksLeaveNothingBehind) {
  auto rs = weft::test::run_job_store_outside(4, {WEFT_TEST_RANK, "shrink-repeat", "20"}, {"WEFT_TIMEOUT_MS=20000"});
  for (size_t r = 0; r < rs.size(); ++r) {
    ASSERT_EQ(rs[r].status, 0) << dump(rs);
    std::smatch warm, last, ok;
    // Baseline after 10 cycles: from cycle 2 the allocator's arenas still settle (a 2 MiB step
    // seen on the build before issue 43 too, 0.5-2 MiB); a leak per shrink still adds up over 10.
    ASSERT_TRUE(std::regex_search(rs[r].output, warm, std::regex("LEAK 10 (\\d+) (\\d+)"))) << dump(rs);
    ASSERT_TRUE(std::regex_search(rs[r].output, last, std::regex("LEAK 20 (\\d+) (\\d+)"))) << dump(rs);
    const long rss_growth = std::stol(last[1].str()) - std::stol(warm[1].str());
    EXPECT_EQ(last[2].str(), warm[2].str()) << "descriptors leaked\n" << dump(rs);
    EXPECT_LT(rss_growth, 2048) << "KiB of resident memory over 10 shrinks\n" << dump(rs);
    std::regex_search(rs[r].output, ok, std::regex("OK 20 shrinks, ([0-9.]+) ms"));
    std::printf("[ figure ] rank %zu: cycles 10 -> 20: %+ld KiB resident, %s -> %s descriptors; %s ms per shrink\n", r,
                rss_growth, warm[2].str().c_str(), last[2].str().c_str(), ok[1].str().c_str());
  }
}

// A second death during the shrink ends in a group without it, never a hang: rank 2 dies in the
// all-reduces, then rank 1 dies during the survivors' shrink, SIGKILLed by this test at a step the
// store shows: as soon as it joined ("shrink0/j/1"), or (frozen by SIGSTOP once it joined) when
// rank 0 builds the new communicator that the survivors decided with rank 1 in it ("s0/node/0"):
// that round fails on every member and the library runs another without rank 1. Survivors 0
// and 3 become 0 and 1.
struct Phase {
  const char* name;
  const char* stop_key;  // "" = killed at once
  const char* kill_key;
};
class SecondDeath : public ::testing::TestWithParam<Phase> {};
TEST_P(SecondDeath, DuringTheShrinkEndsInAGroupWithoutIt) {
  const Phase ph = GetParam();
  long long killed_at = -1;
  auto rs = weft::test::run_job_store_outside(
      4, {WEFT_TEST_RANK, "shrink", "2", "1"}, {"WEFT_TIMEOUT_MS=20000"},
      weft::test::kill_when_key(1, std::string("world0/") + ph.kill_key, &killed_at, *ph.stop_key ? std::string("world0/") + ph.stop_key : ""));
  ASSERT_GE(killed_at, 0) << "the store never held " << ph.kill_key << "\n" << dump(rs);
  EXPECT_EQ(rs[1].status, 128 + SIGKILL) << dump(rs);
  expect_shrunk(rs, {0, 3});
  int retried = 0;
  for (int r : {0, 3}) retried += rs[static_cast<size_t>(r)].output.find("trying again") != std::string::npos;
  std::printf("[ figure ] second death %s: %d of 2 survivors retried the round inside weftCommShrink\n", ph.name, retried);
  if (*ph.stop_key) {
    EXPECT_EQ(retried, 2) << dump(rs);
  }
  for (size_t r = 0; r < rs.size(); ++r) EXPECT_LT(rs[r].seconds, 20.0) << dump(rs);
}
INSTANTIATE_TEST_SUITE_P(Phases, SecondDeath,
                         ::testing::Values(Phase{"AfterJoining", "", "shrink0/j/1"},
                                           Phase{"WhileBuilding", "shrink0/j/1", "s0/node/0"}),
                         [](const auto& info) { return std::string(info.param.name); });

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
      // Run inline and untimed at first, the stuck call took its start from its first wait.
      EXPECT_GT(last.at("started_us").get<double>(), 0) << d.dump(1);
      EXPECT_GE(last.at("finished_us").get<double>() - last.at("started_us").get<double>(), 1000e3) << d.dump(1);
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
    // Timed, or (a call the latency path ran inline without waiting) deliberately untimed.
    const double started = ops[i].at("started_us").get<double>(), finished = ops[i].at("finished_us").get<double>();
    if (finished == 0) {
      EXPECT_EQ(ops[i].at("algorithm"), "direct") << ops[i].dump();
      EXPECT_EQ(started, 0) << ops[i].dump();
      EXPECT_FALSE(ops[i].contains("duration_us")) << ops[i].dump();
    } else {
      EXPECT_GT(started, 0) << ops[i].dump();
      EXPECT_GE(finished, started) << ops[i].dump();
    }
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
