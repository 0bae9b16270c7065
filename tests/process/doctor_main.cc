// The failure shapes weft-doctor names, in real processes under weftrun (tests/process/test_doctor.cc).
// Modes (argv[1]); a rank whose call fails prints "rank R: failed: <error>" and exits 3 (a failed
// job: weftrun collects the dumps and runs weft-doctor).
//   late-sleeper   one all-reduce, then the last rank sleeps 4 s before the second while the others
//                  time out in it: weftrun's SIGUSR1 (dump request) must not cut the sleep short.
//                  The sleeper prints "sleep cut short" if it was.
//   one-short N    N all-reduces; the last rank makes N-1, destroys its communicator and exits 0.
//   no-join        the last rank exits 0 without joining (no weftCommInit); the others' start-up
//                  fails at once naming it (weftrun saw its process end).
//   own-handler    every rank installs a SIGUSR1 handler of its own after joining and signals
//                  itself: the handler runs (the flight recorder's signalfd hands the signal on).
//   late-join      the last rank sleeps 3 s before joining; the others' start-up fails at the
//                  timeout naming it, its process still running.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include <weft/weft.hpp>

namespace {

void all_reduce_or_exit(weft::Comm& comm) {
  float x = 1.0f;
  try {
    comm.all_reduce(&x, &x, 1, weftFloat32, weftSum);
  } catch (const weft::Error& e) {
    std::printf("rank %d: failed: %s\n", comm.rank(), e.what());
    std::fflush(stdout);
    _exit(3);
  }
}

int late_sleeper(weft::Comm& comm) {
  const int r = comm.rank();
  all_reduce_or_exit(comm);
  if (r == comm.size() - 1) {
    std::printf("rank %d: sleeping\n", r);
    std::fflush(stdout);
    timespec left{4, 0};
    if (nanosleep(&left, &left) != 0) std::printf("rank %d: sleep cut short (%ld s left)\n", r, static_cast<long>(left.tv_sec));
    std::fflush(stdout);
  }
  all_reduce_or_exit(comm);
  std::printf("rank %d: OK late-sleeper\n", r);
  return 0;
}

// Lock-free: the handler runs on the flight recorder's watch thread, not this one.
std::atomic<bool> g_own_handler_ran{false};

int own_handler(weft::Comm& comm) {
  const int r = comm.rank();
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_own_handler_ran.store(true); };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, nullptr);
  kill(getpid(), SIGUSR1);
  for (int i = 0; i < 300 && !g_own_handler_ran.load(); ++i) usleep(10000);
  if (!g_own_handler_ran.load()) {
    std::printf("rank %d: FAIL own-handler: the program's SIGUSR1 handler did not run within 3 s\n", r);
    return 1;
  }
  comm.barrier();
  std::printf("rank %d: OK own-handler\n", r);
  return 0;
}

int one_short(weft::Comm& comm, int n) {
  const int r = comm.rank();
  const int mine = r == comm.size() - 1 ? n - 1 : n;
  for (int i = 0; i < mine; ++i) all_reduce_or_exit(comm);
  std::printf("rank %d: OK one-short after %d calls\n", r, mine);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "late-sleeper";
  const int arg = argc > 2 ? std::atoi(argv[2]) : 0;
  const char* rank_env = std::getenv("WEFT_RANK");
  const char* size_env = std::getenv("WEFT_WORLD_SIZE");
  const bool last = rank_env && size_env && std::atoi(rank_env) == std::atoi(size_env) - 1;
  if (mode == "no-join" && last) return 0;
  if (mode == "late-join" && last) sleep(3);
  try {
    weft::Comm comm = weft::Comm::from_env();
    if (mode == "no-join" || mode == "late-join") {
      std::printf("rank %d: joined\n", comm.rank());
      return 0;
    }
    if (mode == "late-sleeper") return late_sleeper(comm);
    if (mode == "one-short") return one_short(comm, arg > 0 ? arg : 5);
    if (mode == "own-handler") return own_handler(comm);
    std::printf("unknown mode %s\n", mode.c_str());
    return 2;
  } catch (const weft::Error& e) {
    std::printf("rank %s: FATAL %s\n", rank_env ? rank_env : "?", e.what());
    std::fflush(stdout);
    return 2;
  }
}
