// weft-test-rank's shrink modes (rank_main.cc dispatches to them): weftCommShrink after a rank is
// killed or excluded, and repeated shrinks checked for leaks (memory and file descriptors).
#include <dirent.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include <weft/weft.hpp>

#include "process/rank_modes.h"

namespace weft_test_rank {

using Clock = std::chrono::steady_clock;

namespace {
std::vector<int> parse_ranks(const std::string& list) {
  std::vector<int> out;
  for (size_t pos = 0; pos < list.size();) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    out.push_back(std::atoi(list.substr(pos, comma - pos).c_str()));
    pos = comma + 1;
  }
  return out;
}

[[noreturn]] void kill_self(int rank, const char* when) {
  std::printf("rank %d: KILL%s at %lld\n", rank, when, wall_ms());
  std::fflush(stdout);
  kill(getpid(), SIGKILL);
  std::abort();
}

// The members of a shrunk communicator, by what they say through it: their old ranks, gathered.
std::vector<int> members_of(weft::Comm& comm, int old_rank) {
  std::vector<int32_t> all(static_cast<size_t>(comm.size()), -1);
  int32_t me = old_rank;
  comm.all_gather(&me, all.data(), 1, weft::Int32);
  return std::vector<int>(all.begin(), all.end());
}

}  // namespace

int shrink_mode(weft::Comm& world, int argc, char** argv) {
  const int r = world.rank(), n = world.size();
  const std::vector<int> victims = parse_ranks(argc > 2 ? argv[2] : "1");
  const int second = argc > 3 ? std::atoi(argv[3]) : -1;
  const int delay_ms = argc > 4 ? std::atoi(argv[4]) : -1;  // -1: killed by someone else
  if (std::find(victims.begin(), victims.end(), r) != victims.end()) {
    std::thread([r] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      kill_self(r, "");
    }).detach();
  }
  std::vector<float> big(size_t{1} << 18, 1.0f);
  try {
    for (auto t0 = Clock::now(); std::chrono::duration<double>(Clock::now() - t0).count() < 60;)
      world.all_reduce(big.data(), big.data(), big.size(), weft::Float32, weft::Sum);
    std::printf("rank %d: NO-ERROR\n", r);
    return 1;
  } catch (const weft::Error& e) {
    std::printf("rank %d: ERROR %d %s\nrank %d: ERROR at %lld\n", r, static_cast<int>(e.code()), e.what(), r, wall_ms());
  }
  std::vector<int> expected;
  for (int q = 0; q < n; ++q)
    if (std::find(victims.begin(), victims.end(), q) == victims.end() && q != second) expected.push_back(q);
  const auto t0 = Clock::now();
  if (r == second && delay_ms >= 0) {
    std::thread([r, delay_ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      kill_self(r, " (during the shrink)");
    }).detach();
  }
  // Shrink, and again whenever the new communicator turns out to hold a rank that died meanwhile,
  // until a collective succeeds on it; with a second victim, keep checking for a second, so that
  // a shrink it survived is followed by the one without it.
  weft::Comm cur;
  std::vector<int> members;
  int shrinks = 0, errors = 0;
  long long first = -1;
  double ms = 0;
  for (;;) {
    try {
      if (!cur || members.empty()) {
        weft::Comm next = (cur ? cur : world).shrink();
        ++shrinks;
        cur = std::move(next);
      }
      members = members_of(cur, r);
      if (first < 0) {
        first = wall_ms();
        ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      }
      // The ranks leave the loop together: each one's wish to stop (its second is over) is
      // all-reduced, so that none starts the final all-reduce while another still gathers.
      int32_t stop = second < 0 || Clock::now() - t0 > std::chrono::milliseconds(std::max(delay_ms, 0) + 1000) ? 1 : 0;
      cur.all_reduce(&stop, &stop, 1, weft::Int32, weft::Max);
      if (stop) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } catch (const weft::Error& e) {
      std::printf("rank %d: SHRINK-ERROR %d %s\n", r, static_cast<int>(e.code()), e.what());
      members.clear();
      if (++errors > 4 || e.code() == weft::ErrorCode::kInvalidArgument || e.code() == weft::ErrorCode::kInvalidUsage) return 1;
    }
  }
  std::printf("rank %d: FIRST at %lld\nrank %d: SHRUNK to rank %d of %d in %.0f ms (%d shrinks)\n", r, first, r, cur.rank(),
              cur.size(), ms, shrinks);
  if (members != expected) {
    std::printf("rank %d: WRONG members", r);
    for (int m : members) std::printf(" %d", m);
    std::printf("\n");
    return 1;
  }
  // Every victim is known dead to the old communicator; a correct all-reduce on the new one.
  for (int v : world.failed_ranks()) std::printf("rank %d: FAILED-RANK %d\n", r, v);
  std::vector<double> v(1000003, r + 0.5);
  cur.all_reduce(v.data(), v.data(), v.size(), weft::Float64, weft::Sum);
  double want = 0;
  for (int m : expected) want += m + 0.5;
  for (double x : v) {
    if (x != want) {
      std::printf("rank %d: WRONG sum %g, expected %g\n", r, x, want);
      return 1;
    }
  }
  world.reset();
  cur.reset();
  std::printf("rank %d: OK shrunk\n", r);
  return 0;
}

// Resident memory (KiB) and open descriptors of this process.
namespace {
std::pair<long, int> rss_and_fds() {
  long rss = -1;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "VmRSS: %ld", &rss) == 1) break;
    std::fclose(f);
  }
  int fds = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++fds;
    closedir(d);
  }
  return {rss, fds - 3};  // less ".", ".." and the directory's own descriptor
}

// N cycles of a failure and a shrink, nobody lost: rank (i % size) aborts its communicator, the
// others' all-reduce fails, everyone shrinks with NULL (the aborted rank is alive: it stays) and
// destroys the old one; each new communicator must work. Prints memory and descriptors after
// cycles 2 (warm), N/2 and N ("LEAK <cycle> <rss KiB> <fds>").
}  // namespace

int shrink_repeat(weft::Comm& world, int argc, char** argv) {
  const int cycles = argc > 2 ? std::atoi(argv[2]) : 20;
  const int r = world.rank(), n = world.size();
  weft::Comm cur = std::move(world);
  std::vector<float> v(size_t{1} << 16, 1.0f);
  double shrink_ms = 0;
  for (int i = 1; i <= cycles; ++i) {
    cur.all_reduce(v.data(), v.data(), 16, weft::Float32, weft::Sum);
    if (r == i % n) cur.abort();
    try {
      cur.all_reduce(v.data(), v.data(), v.size(), weft::Float32, weft::Sum);
      std::printf("rank %d: NO-ERROR in cycle %d\n", r, i);
      return 1;
    } catch (const weft::Error&) {
    }
    const auto t0 = Clock::now();
    weft::Comm next = cur.shrink();
    shrink_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    cur = std::move(next);  // destroys the old one
    if (cur.size() != n || cur.rank() != r) {
      std::printf("rank %d: WRONG cycle %d: rank %d of %d\n", r, i, cur.rank(), cur.size());
      return 1;
    }
    float x = 1.0f;
    cur.all_reduce(&x, &x, 1, weft::Float32, weft::Sum);
    if (x != static_cast<float>(n)) return 1;
    if (i == 2 || i == cycles / 2 || i == cycles) {
      auto [rss, fds] = rss_and_fds();
      std::printf("rank %d: LEAK %d %ld %d\n", r, i, rss, fds);
    }
  }
  std::printf("rank %d: OK %d shrinks, %.1f ms each on average\n", r, cycles, shrink_ms / cycles);
  return 0;
}

}  // namespace weft_test_rank
