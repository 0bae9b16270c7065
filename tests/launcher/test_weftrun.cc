// End-to-end tests of the weftrun binary with rank_probe as the program.
#include <sched.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "launcher/mpi_command.h"
#include "tests/launcher/run_process.h"

namespace {

using weft::test::Finished;
using weft::test::run_process;

const std::string kWeftrun = WEFTRUN_PATH;
const std::string kProbe = RANK_PROBE_PATH;

std::vector<std::string> lines_of(const std::string& text, const std::string& starting = "") {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) {
    if (line.rfind(starting, 0) == 0) out.push_back(line);
  }
  return out;
}

std::string field(const std::string& line, const std::string& name) {
  std::smatch m;
  if (std::regex_search(line, m, std::regex("(^| )" + name + "=(\\S*)"))) return m[2];
  return "";
}

Finished weftrun(std::vector<std::string> args, double timeout_s = 60) {
  args.insert(args.begin(), kWeftrun);
  return run_process(args, timeout_s);
}

std::string temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / (name + "." + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

bool process_exists(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

bool pgrep_finds(const std::string& word) {
  // pgrep itself, not through a shell whose own command line would match.
  std::string pgrep = weft::launcher::find_on_path("pgrep");
  if (pgrep.empty()) ADD_FAILURE() << "pgrep is not on PATH";
  return !pgrep.empty() && run_process({pgrep, "-f", word}, 10).status == 0;
}

class LocalRanks : public ::testing::TestWithParam<int> {};

TEST_P(LocalRanks, EachRankSeesItsPlaceAndAWorkingStore) {
  int n = GetParam();
  Finished f = weftrun({"-np", std::to_string(n), "--bind", "none", kProbe, "--store"});
  ASSERT_EQ(f.status, 0) << f.err;
  auto probes = lines_of(f.out, "probe ");
  ASSERT_EQ(static_cast<int>(probes.size()), n) << f.out;
  std::set<std::string> ranks, masters;
  for (const std::string& p : probes) {
    ranks.insert(field(p, "rank"));
    masters.insert(field(p, "master"));
    EXPECT_EQ(field(p, "size"), std::to_string(n));
    EXPECT_EQ(field(p, "local_size"), std::to_string(n));
    EXPECT_EQ(field(p, "local_rank"), field(p, "rank"));
    EXPECT_EQ(field(p, "secret_len"), "64");
    EXPECT_EQ(field(p, "external"), "1");
    EXPECT_EQ(field(p, "pgid_is_pid"), "1") << "each rank leads its own process group";
  }
  EXPECT_EQ(static_cast<int>(ranks.size()), n);
  ASSERT_EQ(masters.size(), 1u);
  EXPECT_EQ(masters.begin()->rfind("127.0.0.1:", 0), 0u);
  EXPECT_EQ(static_cast<int>(lines_of(f.out, "store ok").size()), n) << f.err;
}

INSTANTIATE_TEST_SUITE_P(Weftrun, LocalRanks, ::testing::Values(1, 2, 3, 4));

TEST(Weftrun, TagOutputPrefixesEveryLineWithTheRank) {
  Finished f = weftrun({"-np", "2", "--tag-output", kProbe});
  ASSERT_EQ(f.status, 0) << f.err;
  EXPECT_EQ(lines_of(f.out, "[0] probe rank=0 ").size(), 1u) << f.out;
  EXPECT_EQ(lines_of(f.out, "[1] probe rank=1 ").size(), 1u) << f.out;
  EXPECT_EQ(lines_of(f.out).size(), 4u) << f.out;  // and a "finished rank=R" line each
}

TEST(Weftrun, TimelinePathIsPerRank) {
  Finished f = weftrun({"-np", "2", "--timeline", "/tmp/tl/trace.json", kProbe});
  ASSERT_EQ(f.status, 0) << f.err;
  for (const std::string& p : lines_of(f.out, "probe ")) {
    EXPECT_EQ(field(p, "timeline"), "/tmp/tl/trace." + field(p, "rank") + ".json");
  }
}

// torch.distributed's env:// variables (as torchrun sets them): init_process_group needs nothing
// by hand under weftrun; one MASTER_PORT for the job, and a MASTER_PORT the user set is kept.
TEST(Weftrun, TorchEnvironmentIsSet) {
  Finished f = weftrun({"-np", "2", "--bind", "none", kProbe});
  ASSERT_EQ(f.status, 0) << f.err;
  std::set<std::string> ports;
  for (const std::string& p : lines_of(f.out, "probe ")) {
    const std::string t = field(p, "torch");
    EXPECT_EQ(t.rfind(field(p, "rank") + ":2:127.0.0.1:", 0), 0u) << p;
    ports.insert(t.substr(t.rfind(':') + 1));
  }
  EXPECT_EQ(ports.size(), 1u) << f.out;
  EXPECT_FALSE(ports.begin()->empty()) << f.out;
  Finished kept = weftrun({"-np", "2", "-x", "MASTER_PORT=29123", "--bind", "none", kProbe});
  ASSERT_EQ(kept.status, 0) << kept.err;
  for (const std::string& p : lines_of(kept.out, "probe ")) EXPECT_NE(field(p, "torch").find(":29123"), std::string::npos) << p;
}

TEST(Weftrun, ExtraEnvironmentReachesEveryRank) {
  Finished f = weftrun({"-np", "2", "-x", "CUDA_VISIBLE_DEVICES=7", "--bind", "none", kProbe});
  ASSERT_EQ(f.status, 0) << f.err;
  for (const std::string& p : lines_of(f.out, "probe ")) EXPECT_EQ(field(p, "cuda"), "7");
}

TEST(Weftrun, NumaBindingPinsEachRankToItsNodesCpus) {
  Finished f = weftrun({"-np", "2", "--bind", "numa", "--verbose", kProbe});
  ASSERT_EQ(f.status, 0) << f.err;
  EXPECT_NE(f.err.find("rank 1: NUMA node"), std::string::npos) << f.err;
  for (const std::string& p : lines_of(f.out, "probe ")) EXPECT_FALSE(field(p, "cpus").empty());
}

TEST(Weftrun, CoresBindingGivesEachRankItsOwnCpus) {
  // As many ranks as this process may use CPUs (at most 4): disjoint, non-empty sets.
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int n = std::min(4, CPU_COUNT(&set));
  if (n < 2) GTEST_SKIP() << "one CPU: nothing to split";
  Finished f = weftrun({"-np", std::to_string(n), "--bind", "cores", "--verbose", kProbe});
  ASSERT_EQ(f.status, 0) << f.err;
  std::set<std::string> seen;
  for (const std::string& p : lines_of(f.out, "probe ")) {
    const std::string cpus = field(p, "cpus");
    EXPECT_FALSE(cpus.empty()) << p;
    EXPECT_TRUE(seen.insert(cpus).second) << "two ranks share CPUs " << cpus << "\n" << f.out;
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(n)) << f.out;
}

TEST(Weftrun, FailingRankStopsTheJobWithItsStatus) {
  Finished f = weftrun({"-np", "3", kProbe, "--exit-rank", "2", "--exit-code", "3", "--sleep", "60"});
  EXPECT_EQ(f.status, 3) << f.err;
  EXPECT_LT(f.seconds, 10);
  EXPECT_TRUE(std::regex_search(f.err, std::regex("rank 2 \\(pid [0-9]+\\) exited with status 3; stopping the other")))
      << f.err;
}

TEST(Weftrun, RankKilledBySignalIsNamedAndStopsTheJob) {
  Finished f = weftrun({"-np", "3", kProbe, "--kill-rank", "1", "--sleep", "60"});
  EXPECT_EQ(f.status, 128 + SIGKILL) << f.err;
  EXPECT_LT(f.seconds, 10);
  EXPECT_TRUE(std::regex_search(f.err, std::regex("rank 1 \\(pid [0-9]+\\) was killed by signal 9"))) << f.err;
}

// --keep-going: a rank's death is reported and the others run to their end; the status says how
// the job ended (75: finished on the survivors; a survivor's own failure wins).
TEST(Weftrun, KeepGoingReportsTheDeathAndTheOthersFinish) {
  Finished f = weftrun({"-np", "3", "--keep-going", kProbe, "--kill-rank", "1", "--sleep", "1.5"});
  EXPECT_EQ(f.status, 75) << f.err;
  EXPECT_TRUE(std::regex_search(f.err, std::regex("rank 1 \\(pid [0-9]+\\) was killed by signal 9 .*after [0-9.]+ s; the other ranks "
                                                  "keep running \\(--keep-going\\)")))
      << f.err;
  EXPECT_NE(f.err.find("2 of 3 ranks finished with status 0"), std::string::npos) << f.err;
  EXPECT_EQ(lines_of(f.out, "finished rank=").size(), 2u) << f.out;
  EXPECT_GT(f.seconds, 1.4) << "the survivors were stopped";
}

TEST(Weftrun, KeepGoingASurvivorsFailureIsTheStatus) {
  Finished f = weftrun({"-np", "3", "--keep-going", kProbe, "--kill-rank", "1", "--exit-rank", "2", "--exit-code", "3", "--sleep", "1"});
  EXPECT_EQ(f.status, 3) << f.err;
  EXPECT_NE(f.err.find("1 of 3 ranks finished with status 0"), std::string::npos) << f.err;
  EXPECT_EQ(lines_of(f.out, "finished rank=").size(), 1u) << f.out;
}

// Starts a sleeping job, waits for every rank to be up, sends sig to weftrun, and checks that
// weftrun exits 128+sig and that no rank survives.
void expect_signal_stops_everything(int sig, bool ranks_ignore_term, double max_seconds) {
  std::string dir = temp_dir("weftrun_sig");
  std::string marker = "weftrun_marker_" + std::to_string(getpid()) + "_" + std::to_string(sig);
  std::vector<std::string> args{kWeftrun, "-np", "3", kProbe, "--sleep", "60", "--pid-dir", dir, "--marker", marker};
  if (ranks_ignore_term) args.push_back("--ignore-term");
  auto r = weft::test::start_process(args);
  std::vector<pid_t> pids;
  for (int tries = 0; tries < 200 && pids.size() < 3; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    pids.clear();
    for (int rank = 0; rank < 3; ++rank) {
      std::ifstream in(dir + "/rank" + std::to_string(rank) + ".pid");
      pid_t pid = 0;
      if (in >> pid) pids.push_back(pid);
    }
  }
  ASSERT_EQ(pids.size(), 3u) << "ranks did not start";
  auto sent = std::chrono::steady_clock::now();
  kill(r.pid, sig);
  Finished f = weft::test::finish_process(r, 30);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  EXPECT_FALSE(f.timed_out);
  EXPECT_EQ(f.status, 128 + sig) << f.err;
  EXPECT_LT(took, max_seconds);
  for (pid_t pid : pids) EXPECT_FALSE(process_exists(pid)) << "rank pid " << pid << " survived";
  EXPECT_FALSE(pgrep_finds(marker)) << "a process with " << marker << " is left behind";
  std::filesystem::remove_all(dir);
}

TEST(Weftrun, SigtermIsForwardedAndNothingIsLeftBehind) { expect_signal_stops_everything(SIGTERM, false, 3); }
TEST(Weftrun, SigintIsForwardedAndNothingIsLeftBehind) { expect_signal_stops_everything(SIGINT, false, 3); }
TEST(Weftrun, RanksIgnoringSigtermAreKilledAfterTheGracePeriod) {
  expect_signal_stops_everything(SIGTERM, true, 10);
}

TEST(Weftrun, WhatAFailedRankStartedIsStoppedToo) {
  // Each rank's shell starts a background probe (same process group) and rank 1 then fails.
  std::string marker = "weftrun_orphan_" + std::to_string(getpid());
  Finished f = weftrun({"-np", "2", "/bin/sh", "-c",
                        "\"$0\" --sleep 60 --marker " + marker +
                            " & if [ \"$WEFT_RANK\" = 1 ]; then sleep 0.3; exit 4; fi; wait",
                        kProbe},
                       30);
  EXPECT_EQ(f.status, 4) << f.err;
  EXPECT_LT(f.seconds, 10);
  EXPECT_FALSE(pgrep_finds(marker)) << "a background process of a rank is left behind";
}

TEST(Weftrun, RanksDieWithAKilledWeftrun) {
  std::string marker = "weftrun_pdeath_" + std::to_string(getpid());
  auto r = weft::test::start_process({kWeftrun, "-np", "2", kProbe, "--sleep", "60", "--marker", marker});
  for (int tries = 0; tries < 100 && !pgrep_finds(marker); ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(pgrep_finds(marker)) << "ranks did not start";
  kill(r.pid, SIGKILL);
  Finished f = weft::test::finish_process(r, 20);  // EOF only once the ranks are gone too
  EXPECT_FALSE(f.timed_out);
  EXPECT_EQ(f.status, 128 + SIGKILL);
  bool gone = false;
  for (int tries = 0; tries < 100 && !gone; ++tries) {
    gone = !pgrep_finds(marker);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gone) << "a rank outlived SIGKILL to weftrun";
}

TEST(Weftrun, TimeoutStopsTheJob) {
  Finished f = weftrun({"-np", "2", "--timeout", "1", kProbe, "--sleep", "60"});
  EXPECT_EQ(f.status, 124) << f.err;
  EXPECT_LT(f.seconds, 8);
  EXPECT_NE(f.err.find("--timeout"), std::string::npos) << f.err;
}

TEST(Weftrun, MissingProgramExits127) {
  Finished f = weftrun({"-np", "1", "/nonexistent/program"});
  EXPECT_EQ(f.status, 127);
  EXPECT_NE(f.err.find("cannot find program"), std::string::npos) << f.err;
}

TEST(Weftrun, BadUsageExits2WithAClearMessage) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"-np", "2"}, "no program to run"},
      {{"-np", "0", kProbe}, "-np must be at least 1"},
      {{"-np", "2", "--bind", "sideways", kProbe}, "--bind must be none, numa, gpu, cores or auto"},
      {{"-np", "2", "--mpi", "lam", kProbe}, "--mpi must be"},
      {{kProbe}, "np"},
      {{"-np", "2", "-x", "1BAD=x", kProbe}, "not a variable name"},
      {{"-np", "2", "--mpi", "none", "-H", "far.example.invalid", kProbe}, "is remote"},
  };
  for (const Case& c : cases) {
    Finished f = weftrun(c.args);
    EXPECT_EQ(f.status, 2) << c.message;
    EXPECT_NE(f.err.find(c.message), std::string::npos) << f.err;
  }
}

TEST(Weftrun, MpichTranslationDryRun) {
  Finished f = weftrun({"-np", "4", "--mpi", "mpich", "--dry-run", "-x", "FOO=bar baz", "-H", "a:2,b:2",
                        "--bind", "numa", kProbe, "--store"});
  ASSERT_EQ(f.status, 0) << f.err;
  auto lines = lines_of(f.out);
  ASSERT_EQ(lines.size(), 1u) << f.out;
  EXPECT_EQ(lines[0].rfind("mpiexec -n 4 -genv FOO 'bar baz'", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(" -hosts a:2,b:2 -bind-to numa "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(kProbe + " --store"), std::string::npos) << lines[0];
}

TEST(Weftrun, OpenMpiTranslationDryRun) {
  Finished f = weftrun({"-np", "8", "--mpi", "openmpi", "--dry-run", "-x", "FOO=1", "-H", "a:2,b:2", kProbe});
  ASSERT_EQ(f.status, 0) << f.err;
  std::string expected_start = std::string("mpirun ") + (geteuid() == 0 ? "--allow-run-as-root " : "") + "-np 8 -H a:2,b:2 --oversubscribe";
  EXPECT_EQ(f.out.rfind(expected_start, 0), 0u) << f.out;
  EXPECT_NE(f.out.find(" -x FOO=1 "), std::string::npos) << f.out;
}

bool have_open_mpi() {
  std::string mpirun = weft::launcher::find_on_path("mpirun");
  return !mpirun.empty() && weft::launcher::detect_mpi_flavor(mpirun) == weft::launcher::MpiFlavor::kOpenMpi;
}

TEST(Weftrun, OpenMpiRunsTheRanks) {
  if (!have_open_mpi()) GTEST_SKIP() << "Open MPI's mpirun is not on PATH";
  Finished f = weftrun({"-np", "2", "--mpi", "openmpi", "-x", "PROBE_VAR=1", kProbe}, 120);
  ASSERT_EQ(f.status, 0) << f.err;
  auto probes = lines_of(f.out, "probe ");
  ASSERT_EQ(probes.size(), 2u) << f.out << f.err;
  std::set<std::string> ranks;
  for (const std::string& p : probes) {
    EXPECT_EQ(field(p, "launcher"), "Open");  // "Open MPI"
    ranks.insert(field(p, "rank"));
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1"}));
}

TEST(Weftrun, OpenMpiFailureIsPropagated) {
  if (!have_open_mpi()) GTEST_SKIP() << "Open MPI's mpirun is not on PATH";
  Finished f = weftrun({"-np", "2", "--mpi", "openmpi", kProbe, "--exit-rank", "1", "--exit-code", "3", "--sleep", "60"}, 120);
  EXPECT_NE(f.status, 0) << f.err;
  EXPECT_LT(f.seconds, 60);
}

TEST(Weftrun, AutoPicksMpiForRemoteHosts) {
  if (!have_open_mpi()) GTEST_SKIP() << "Open MPI's mpirun is not on PATH";
  Finished f = weftrun({"-np", "2", "-H", "far.example.invalid:2", "--dry-run", kProbe});
  ASSERT_EQ(f.status, 0) << f.err;
  EXPECT_EQ(f.out.rfind("mpirun ", 0), 0u) << f.out;
  Finished local = weftrun({"-np", "2", "-H", "localhost:2", "--dry-run", kProbe});
  ASSERT_EQ(local.status, 0) << local.err;
  EXPECT_EQ(local.out.rfind("WEFT_RANK=0 ", 0), 0u) << local.out;
}

}  // namespace
