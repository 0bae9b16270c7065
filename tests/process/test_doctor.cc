// The failure shapes weft-doctor names after a failed job under weftrun (process/doctor_main.cc):
// a rank that slept through weftrun's dump request (the request must not wake it), a rank that
// left cleanly one call short; and a rank that never joined at start-up, named by the others.
#include <gtest/gtest.h>

#include "launcher/run_process.h"

namespace {

weft::test::Finished weftrun(std::vector<std::string> args) {
  std::vector<std::string> argv{WEFTRUN_PATH, "-np", "3", "-x", "WEFT_TIMEOUT_MS=1000"};
  argv.insert(argv.end(), args.begin(), args.end());
  return weft::test::run_process(argv, 60);
}

// Rank 2 sleeps while ranks 0 and 1 time out in the second all-reduce; weftrun sends it SIGUSR1 to
// collect its dump. The signal used to cut its sleep short, so it made the call and the doctor
// named the wrong rank. Now the sleep runs on and the doctor says rank 2 never called it.
TEST(Doctor, ADumpRequestDoesNotWakeASleepingRank) {
  auto f = weftrun({WEFT_TEST_DOCTOR, "late-sleeper"});
  const std::string all = f.out + f.err;
  EXPECT_NE(f.status, 0) << all;
  EXPECT_EQ(all.find("sleep cut short"), std::string::npos) << all;
  EXPECT_NE(all.find("rank 2: sleeping"), std::string::npos) << all;
  EXPECT_NE(f.err.find("weftrun: weft-doctor "), std::string::npos) << all;
  EXPECT_NE(f.err.find("allreduce #1 (1 float32, sum) on the world communicator: ranks 0, 1 started it"), std::string::npos)
      << all;
  EXPECT_NE(f.err.find("rank 2 never called it (its last was allreduce #0"), std::string::npos) << all;
}

// A SIGUSR1 handler the program installs after weftCommInit still gets its signals (the threads
// that block SIGUSR1 for the flight recorder would otherwise keep them from it).
TEST(Doctor, AProgramsOwnSigusr1HandlerStillRuns) {
  auto f = weft::test::run_process({WEFTRUN_PATH, "-np", "2", WEFT_TEST_DOCTOR, "own-handler"}, 60);
  const std::string all = f.out + f.err;
  EXPECT_EQ(f.status, 0) << all;
  for (int r : {0, 1}) EXPECT_NE(all.find("rank " + std::to_string(r) + ": OK own-handler"), std::string::npos) << all;
}

// Rank 2 makes 4 all-reduces of 5, destroys its communicator and exits 0; the others fail in the
// fifth. The doctor said rank 2 "may have died or been killed".
TEST(Doctor, NamesARankThatExitedNormallyOneCallShort) {
  auto f = weftrun({WEFT_TEST_DOCTOR, "one-short", "5"});
  const std::string all = f.out + f.err;
  EXPECT_EQ(f.status, 3) << all;
  EXPECT_NE(all.find("rank 2: OK one-short after 4 calls"), std::string::npos) << all;
  EXPECT_NE(f.err.find("rank 2 exited normally (status 0) after 4 calls on the world communicator; ranks 0, 1 waited in "
                       "call 5 (allreduce #4 (1 float32, sum)) and failed there"),
            std::string::npos) << all;
  EXPECT_EQ(f.err.find("died or was killed"), std::string::npos) << all;
  EXPECT_EQ(f.err.find("died or been killed"), std::string::npos) << all;
}

// Rank 2 exits 0 without joining: ranks 0 and 1 fail their start-up at once (not after the
// 30 s timeout: the test's own limit is 20 s), naming it and how its process ended.
TEST(Startup, ARankThatNeverJoinedIsNamedAtOnce) {
  auto f = weft::test::run_process({WEFTRUN_PATH, "-np", "3", "-x", "WEFT_TIMEOUT_MS=30000", WEFT_TEST_DOCTOR, "no-join"}, 20);
  const std::string all = f.out + f.err;
  EXPECT_FALSE(f.timed_out) << all;
  EXPECT_EQ(f.status, 2) << all;
  // The first of ranks 0 and 1 to fail stops the job.
  EXPECT_NE(all.find("FATAL start-up: 1 of 3 ranks never joined: rank 2 (weftrun: its process exited with status 0)"),
            std::string::npos) << all;
}

// Rank 2 is still asleep when the timeout (1 s) passes: the others fail naming it, its process
// running.
TEST(Startup, ARankThatDidNotJoinInTimeIsNamed) {
  auto f = weftrun({WEFT_TEST_DOCTOR, "late-join"});
  const std::string all = f.out + f.err;
  EXPECT_EQ(f.status, 2) << all;
  EXPECT_NE(all.find("FATAL start-up: 1 of 3 ranks never joined within the timeout of 1000 ms (WEFT_TIMEOUT_MS): rank 2 "
                     "(weftrun: its process is running; it has not called weftCommInit)"),
            std::string::npos) << all;
  EXPECT_EQ(all.find("rank 2: joined"), std::string::npos) << all;  // stopped with the failed job
}

}  // namespace
