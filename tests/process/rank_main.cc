// weft-test-rank: one rank of a real multi-process job, driven through the public C++ API only.
// Modes (argv[1]):
//   check            all-reduce at odd sizes in and out of place, and asynchronous calls in order,
//                    through the shared library (every collective x type x op: weft-test-matrix);
//                    an all-reduce on weftMemAlloc buffers takes the shared path
//   die              rank 1 SIGKILLs itself in the middle of a large all-reduce loop
//   die-small        the same in a loop of 16-element all-reduces (the shared-memory latency path)
//   absent           rank 1 never enters the collective (sleeps past the timeout)
//   mismatch         rank 1 calls with a different count
//   abort            rank 0 aborts its communicator from another thread while waiting
//   abort-async      rank 0 aborts from another thread while three asynchronous calls wait
//   argerror         every rank passes a bad root first: an argument error, then a correct call
//   idle             after blocking and asynchronous calls (the queue's thread started), the
//                    process's CPU time over a second of idling must stay under 1% of a core
//   skip             four all-reduces of 1024 floats, then the last rank skips the fifth (it sleeps
//                    past the others' timeout and leaves): the others fail, every rank's flight
//                    recorder must be dumped (the last rank's by its watch thread)
//   mismatch-small   the same four, then rank 1 calls the fifth with 1023 floats
//   dump             weftCommDump and SIGUSR1 each write WEFT_DUMP_DIR/rank<R>.json
//   metrics DIR      7 small and 2 large all-reduces and 3 barriers, then GET /metrics from this
//                    rank's endpoint (WEFT_METRICS_PORT + local rank) into DIR/http.<R>.prom, then 2
//                    steps of a gradient reducer; WEFT_METRICS_FILE is written at destroy
//   levels           ranks 2k and 2k+1 act as node k (WEFT_NODE_ID); weftCommSplitLevel's node and
//                    rail communicators hold the expected ranks, in order, and all-reduce over them
//   shrink-repeat N  N cycles of an abort and a shrink (nobody lost); memory and descriptors
//                    after cycles 2, N/2 and N ("LEAK <cycle> <rss KiB> <fds>")
//   shrink V[,V...] [S [DELAY_MS]]
//                    ranks V SIGKILL themselves 300 ms into a loop of all-reduces; the survivors
//                    catch the error, weftCommShrink(NULL) and check the new communicator (its
//                    members by an all-gather of their old ranks, an all-reduce). Rank S (if given)
//                    dies during the shrink: it SIGKILLs itself DELAY_MS after it entered it, or
//                    (no DELAY_MS) the test kills it; whoever is left shrinks again if the new
//                    communicator fails. Prints "KILL at", "ERROR at", "SHRUNK ... in <ms> ms
//                    (<n> shrinks)" and "FIRST at" (system clock, ms: the first collective that
//                    succeeded on a shrunk communicator).
// After an error every mode checks that the communicator is broken, not half-broken: one more
// call must fail at once with the original cause ("rank R: AFTER <code> <ms> <message>").
// Exit status: 0 when the mode's expectation held on this rank; the last line on stdout says
// "rank R: <result> <code> <elapsed ms> <message>".
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

namespace {

using Clock = std::chrono::steady_clock;

float input(int rank, size_t i) { return static_cast<float>(static_cast<int>((i * 7 + rank * 13) % 101) - 50); }

int check(weft::Comm& comm) {
  const int n = comm.size(), r = comm.rank();
  for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{13}, size_t{1009}, (size_t{1} << 20) + 3,
                       size_t{6} << 20}) {
    std::vector<float> send(count), recv(count + 8, -1.0f), inplace(count);
    for (size_t i = 0; i < count; ++i) send[i] = inplace[i] = input(r, i);
    comm.all_reduce(send.data(), recv.data(), count, weft::Float32, weft::Sum);
    comm.all_reduce(inplace.data(), inplace.data(), count, weft::Float32, weft::Sum);
    for (size_t i = 0; i < count; ++i) {
      double ref = 0;
      for (int k = 0; k < n; ++k) ref += input(k, i);
      if (recv[i] != static_cast<float>(ref) || inplace[i] != static_cast<float>(ref)) {
        std::printf("rank %d: WRONG count %zu element %zu: %g / %g, expected %g\n", r, count, i, recv[i], inplace[i], ref);
        return 1;
      }
    }
    for (int k = 0; k < 8; ++k) {
      if (recv[count + k] != -1.0f) {
        std::printf("rank %d: wrote past the end at count %zu\n", r, count);
        return 1;
      }
    }
  }
  // Asynchronous operations overlap with work on this thread and complete in order.
  std::vector<std::vector<double>> bufs(4, std::vector<double>(4099));
  std::vector<weft::Work> works;
  for (int k = 0; k < 4; ++k) {
    for (size_t i = 0; i < bufs[k].size(); ++i) bufs[k][i] = r + k + static_cast<double>(i);
    works.push_back(comm.all_reduce_async(bufs[k].data(), bufs[k].data(), bufs[k].size(), weft::Float64, weft::Max));
  }
  for (int k = 0; k < 4; ++k) {
    works[k].wait();
    for (size_t i = 0; i < bufs[k].size(); ++i) {
      if (bufs[k][i] != (n - 1) + k + static_cast<double>(i)) {
        std::printf("rank %d: WRONG async max\n", r);
        return 1;
      }
    }
  }
  // Windows (weftMemAlloc): a large all-reduce on them, in place and asynchronous,
  // takes the shared path (no copies) between these processes, with the same results.
  {
    const size_t count = (size_t{1} << 20) + 3;
    void* p = nullptr;
    if (weftMemAlloc(comm.get(), count * sizeof(float), &p) != weftSuccess || !p) {
      std::printf("rank %d: weftMemAlloc failed\n", r);
      return 1;
    }
    auto* f = static_cast<float*>(p);
    for (size_t i = 0; i < count; ++i) f[i] = input(r, i);
    comm.all_reduce_async(f, f, count, weft::Float32, weft::Sum).wait();
    const char* algo = "";
    weftCommLastAlgorithm(comm.get(), &algo);
    for (size_t i = 0; i < count; ++i) {
      double ref = 0;
      for (int k = 0; k < n; ++k) ref += input(k, i);
      if (f[i] != static_cast<float>(ref)) {
        std::printf("rank %d: WRONG shared all-reduce element %zu: %g, expected %g\n", r, i, f[i], ref);
        return 1;
      }
    }
    if (std::strcmp(algo, "window") != 0) {
      std::printf("rank %d: the all-reduce on weftMemAlloc buffers ran '%s', not 'window'\n", r, algo);
      return 1;
    }
    if (weftMemFree(comm.get(), p) != weftSuccess || weftMemFree(comm.get(), p) == weftSuccess) {
      std::printf("rank %d: weftMemFree: freeing once must work, twice must not\n", r);
      return 1;
    }
    // The C++ wrapper: a zero-filled buffer, freed; a second free throws.
    auto* q = static_cast<double*>(comm.mem_alloc(4099 * sizeof(double)));
    bool zero = true;
    for (size_t i = 0; i < 4099; ++i) zero = zero && q[i] == 0.0;
    comm.mem_free(q);
    bool threw = false;
    try {
      comm.mem_free(q);
    } catch (const weft::Error&) {
      threw = true;
    }
    if (!zero || !threw) {
      std::printf("rank %d: Comm::mem_alloc: %s\n", r, !zero ? "not zero-filled" : "a second mem_free did not throw");
      return 1;
    }
  }
  comm.barrier();
  std::printf("rank %d: OK %d ranks\n", r, n);
  return 0;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);  // every thread of the process
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// An idle communicator costs no CPU: no thread of it polls while nothing is asked of it.
int idle(weft::Comm& comm) {
  std::vector<float> small(16, 1.0f), big(size_t{1} << 20, 1.0f);
  comm.all_reduce(small.data(), small.data(), small.size(), weft::Float32, weft::Sum);
  comm.all_reduce(big.data(), big.data(), big.size(), weft::Float32, weft::Sum);
  comm.all_reduce_async(big.data(), big.data(), big.size(), weft::Float32, weft::Sum).wait();
  comm.barrier();
  const double c0 = cpu_seconds();
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double used = cpu_seconds() - c0, wall = std::chrono::duration<double>(Clock::now() - t0).count();
  comm.barrier();
  const double share = 100.0 * used / wall;
  std::printf("rank %d: IDLE %.3f%% of a core (%.1f ms CPU over %.2f s)\n", comm.rank(), share, used * 1e3, wall);
  return share < 1.0 ? 0 : 1;
}

// After an error the communicator must be broken: the next call fails at once with the cause.
int after_error(weft::Comm& comm, const std::string& cause) {
  std::vector<float> v(16, 1.0f);
  auto t0 = Clock::now();
  try {
    comm.all_reduce(v.data(), v.data(), v.size(), weft::Float32, weft::Sum);
    std::printf("rank %d: AFTER-NO-ERROR: a call on a failed communicator succeeded\n", comm.rank());
    return 1;
  } catch (const weft::Error& e) {
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::printf("rank %d: AFTER %d %.0f %s\n", comm.rank(), static_cast<int>(e.code()), ms, e.what());
    std::string what = e.what();
    // The original cause is quoted (its first 40 characters suffice to recognise it).
    bool same = what.find(cause.substr(0, std::min<size_t>(cause.size(), 40))) != std::string::npos ||
                (cause.find("abort") != std::string::npos && what.find("abort") != std::string::npos);
    return ms < 100 && same ? 0 : 1;
  }
}

// Milliseconds of the system clock, comparable between the processes of one machine.
using weft_test_rank::wall_ms;

int expect_failure(weft::Comm& comm, const char* mode) {
  const int r = comm.rank();
  auto t0 = Clock::now();
  std::vector<float> big(size_t{8} << 20, 1.0f);
  try {
    const bool small = !std::strcmp(mode, "die-small");
    if ((!std::strcmp(mode, "die") || small) && r == 1) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::printf("rank 1: KILL at %lld\n", wall_ms());  // the survivors' error times count from here
        std::fflush(stdout);
        kill(getpid(), SIGKILL);
      }).detach();
    }
    if (!std::strcmp(mode, "absent") && r == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(6));
      return 0;
    }
    if (!std::strcmp(mode, "abort") && r == 0) {
      std::thread([&comm] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        comm.abort();
      }).detach();
    }
    size_t count = small ? 16 : big.size();
    if (!std::strcmp(mode, "mismatch") && r == 1) count -= 1;
    if (!std::strcmp(mode, "abort") && r != 0) {
      std::this_thread::sleep_for(std::chrono::seconds(4));  // rank 0 waits on us, then aborts
      return 0;
    }
    for (int it = 0; it < 1000000; ++it) {
      comm.all_reduce(big.data(), big.data(), count, weft::Float32, weft::Sum);
      if (std::chrono::duration<double>(Clock::now() - t0).count() > 60) break;
    }
    std::printf("rank %d: NO-ERROR\n", r);
    return 1;
  } catch (const weft::Error& e) {
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::printf("rank %d: ERROR %d %.0f %s\n", r, static_cast<int>(e.code()), ms, e.what());
    std::printf("rank %d: ERROR at %lld\n", r, wall_ms());
    std::fflush(stdout);
    return after_error(comm, e.what());
  }
}

// Four good all-reduces, then the fifth goes wrong: the last rank skips it (sleeps past the others'
// timeout), or rank 1 passes another count. The job's dumps are checked by the test (weft-doctor).
int skip_or_mismatch(weft::Comm& comm, bool skip) {
  const int r = comm.rank(), n = comm.size();
  std::vector<float> v(1024, 1.0f);
  for (int k = 0; k < 4; ++k) comm.all_reduce(v.data(), v.data(), v.size(), weft::Float32, weft::Sum);
  if (skip && r == n - 1) {
    std::this_thread::sleep_for(std::chrono::seconds(4));
    std::printf("rank %d: SKIPPED\n", r);
    return 0;
  }
  try {
    comm.all_reduce(v.data(), v.data(), !skip && r == 1 ? 1023 : 1024, weft::Float32, weft::Sum);
    std::printf("rank %d: NO-ERROR\n", r);
    return 1;
  } catch (const weft::Error& e) {
    std::printf("rank %d: ERROR %d %s\n", r, static_cast<int>(e.code()), e.what());
    return 0;
  }
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && st.st_size > 0;
}

// weftCommDump writes the dump at once; SIGUSR1 makes the watch thread write it.
int dump_modes(weft::Comm& comm) {
  const int r = comm.rank();
  const char* dir = std::getenv("WEFT_DUMP_DIR");
  if (!dir) return 1;
  const std::string path = std::string(dir) + "/rank" + std::to_string(r) + ".json";
  std::vector<float> v(16, 1.0f);
  for (int k = 0; k < 3; ++k) comm.all_reduce(v.data(), v.data(), v.size(), weft::Float32, weft::Sum);
  comm.dump();
  if (!file_exists(path)) {
    std::printf("rank %d: WRONG no %s after weftCommDump\n", r, path.c_str());
    return 1;
  }
  ::unlink(path.c_str());
  comm.barrier();
  kill(getpid(), SIGUSR1);
  for (int i = 0; i < 300 && !file_exists(path); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!file_exists(path)) {
    std::printf("rank %d: WRONG no %s 3 s after SIGUSR1\n", r, path.c_str());
    return 1;
  }
  comm.barrier();
  std::printf("rank %d: OK dump\n", r);
  return 0;
}

// GET http://127.0.0.1:port/metrics with a plain socket (HTTP/1.0: the server closes when done);
// the body, or "" on any failure.
std::string http_get_metrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string got;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, req, sizeof req - 1) == static_cast<ssize_t>(sizeof req - 1)) {
      char buf[4096];
      for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  const auto body = got.find("\r\n\r\n");
  return got.rfind("HTTP/1.", 0) == 0 && got.find(" 200 ") != std::string::npos && body != std::string::npos ? got.substr(body + 4) : "";
}

int metrics(weft::Comm& comm, const char* dir) {
  const int r = comm.rank();
  std::vector<float> small(16, 1.0f), big(size_t{2} << 20, 1.0f);
  for (int k = 0; k < 7; ++k) comm.all_reduce(small.data(), small.data(), small.size(), weft::Float32, weft::Sum);
  for (int k = 0; k < 2; ++k) comm.all_reduce(big.data(), big.data(), big.size(), weft::Float32, weft::Sum);
  for (int k = 0; k < 3; ++k) comm.barrier();
  const char* port = std::getenv("WEFT_METRICS_PORT");
  const std::string body = port ? http_get_metrics(std::atoi(port) + comm.local_rank()) : "";
  if (body.empty()) {
    std::printf("rank %d: WRONG no answer from the metrics endpoint\n", r);
    return 1;
  }
  FILE* f = std::fopen((std::string(dir) + "/http." + std::to_string(r) + ".prom").c_str(), "w");
  if (!f) return 1;
  std::fwrite(body.data(), 1, body.size(), f);
  std::fclose(f);
  comm.barrier();  // every rank has read its endpoint before the reducer's all-reduces start
  // Two steps of the overlap reducer over two parameters: weft_step_*{source="reducer"}.
  std::vector<float> g1(1000, 1.0f), g2(3000, 2.0f);
  weftReducer_t red = nullptr;
  if (weftReducerCreate(comm.get(), nullptr, &red) != weftSuccess) return 1;
  int i1 = 0, i2 = 0;
  weftReducerAddParam(red, g1.data(), g1.size(), weftFloat32, "w1", &i1);
  weftReducerAddParam(red, g2.data(), g2.size(), weftFloat32, "w2", &i2);
  for (int step = 0; step < 2; ++step) {
    weftReducerBeginStep(red, 1);
    weftReducerMarkReady(red, i2);
    weftReducerMarkReady(red, i1);
    weftStepStats_t st{};
    if (weftReducerFinalize(red, &st) != weftSuccess) return 1;
  }
  weftReducerDestroy(red);
  std::printf("rank %d: OK metrics\n", r);
  return 0;
}

int abort_async(weft::Comm& comm) {
  const int r = comm.rank();
  if (r != 0) {
    std::this_thread::sleep_for(std::chrono::seconds(4));  // never joins; rank 0 aborts
    return 0;
  }
  std::vector<std::vector<float>> bufs(3, std::vector<float>(1 << 20, 1.0f));
  std::vector<weft::Work> works;
  for (auto& b : bufs) works.push_back(comm.all_reduce_async(b.data(), b.data(), b.size(), weft::Float32, weft::Sum));
  auto t0 = Clock::now();
  std::thread([&comm] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    comm.abort();
  }).detach();
  int errors = 0;
  std::string first;
  for (auto& w : works) {
    try {
      w.wait();
    } catch (const weft::Error& e) {
      if (!errors++) first = e.what();
    }
  }
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("rank %d: %s 4 %.0f %d of 3 requests released: %s\n", r, errors == 3 ? "ERROR" : "NO-ERROR", ms, errors,
              first.c_str());
  return errors == 3 ? after_error(comm, first) : 1;
}

int arg_error(weft::Comm& comm) {
  const int r = comm.rank(), n = comm.size();
  std::vector<float> buf(1000, 1.0f);
  try {
    comm.broadcast(buf.data(), buf.data(), buf.size(), weft::Float32, n + 3);
    std::printf("rank %d: NO-ERROR for a bad root\n", r);
    return 1;
  } catch (const weft::Error& e) {
    std::printf("rank %d: ARG %d %s\n", r, static_cast<int>(e.code()), e.what());
    if (e.code() != weft::ErrorCode::kInvalidArgument) return 1;
  }
  comm.all_reduce(buf.data(), buf.data(), buf.size(), weft::Float32, weft::Sum);
  if (buf[0] != static_cast<float>(n)) return 1;
  std::printf("rank %d: OK usable after an argument error\n", r);
  return 0;
}

// Node k = world ranks 2k, 2k+1 (the last node may have one). Each level's communicator must hold
// exactly the ranks that share this rank's node (or local rank), ordered by local rank (or node),
// and an all-reduce over it must add up exactly their world ranks.
int levels(weft::Comm& comm) {
  const int n = comm.size(), r = comm.rank();
  if (comm.local_rank() != r % 2 || comm.local_size() != std::min(2, n - r / 2 * 2)) {
    std::printf("rank %d: WRONG local rank %d of %d\n", r, comm.local_rank(), comm.local_size());
    return 1;
  }
  for (weftLevel_t level : {weftLevelNode, weftLevelRail}) {
    std::vector<int> members;  // world ranks of the group, in the level's order
    for (int q = 0; q < n; ++q)
      if (level == weftLevelNode ? q / 2 == r / 2 : q % 2 == r % 2) members.push_back(q);
    weft::Comm sub = comm.split_level(level);
    const int want_rank = static_cast<int>(std::find(members.begin(), members.end(), r) - members.begin());
    double sum = r, want = 0;
    for (int q : members) want += q;
    sub.all_reduce(&sum, &sum, 1, weft::Float64, weft::Sum);
    // Who is where: every member's world rank, gathered in the sub-communicator's order.
    std::vector<int32_t> order(members.size(), -1);
    int32_t me = r;
    sub.all_gather(&me, order.data(), 1, weft::Int32);
    const char* name = level == weftLevelNode ? "node" : "rail";
    if (sub.size() != static_cast<int>(members.size()) || sub.rank() != want_rank || sum != want ||
        !std::equal(order.begin(), order.end(), members.begin())) {
      std::printf("rank %d: WRONG %s communicator: rank %d of %d (expected %d of %zu), sum %g (expected %g)\n", r, name,
                  sub.rank(), sub.size(), want_rank, members.size(), sum, want);
      return 1;
    }
  }
  weftComm_t none = nullptr;
  if (weftCommSplitLevel(comm.get(), static_cast<weftLevel_t>(7), &none) != weftInvalidArgument || none) {
    std::printf("rank %d: WRONG an unknown level was accepted\n", r);
    return 1;
  }
  std::printf("rank %d: OK levels\n", r);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "check";
  if (!std::strcmp(mode, "levels")) {
    const char* rank = std::getenv("WEFT_RANK");
    const std::string node = "node" + std::to_string(rank ? std::atoi(rank) / 2 : 0);
    setenv("WEFT_NODE_ID", node.c_str(), 1);
  }
  try {
    weft::Comm comm = weft::Comm::from_env();
    int rc = !std::strcmp(mode, "check")         ? check(comm)
             : !std::strcmp(mode, "abort-async") ? abort_async(comm)
             : !std::strcmp(mode, "argerror")    ? arg_error(comm)
             : !std::strcmp(mode, "levels")      ? levels(comm)
             : !std::strcmp(mode, "idle")        ? idle(comm)
             : !std::strcmp(mode, "shrink")      ? weft_test_rank::shrink_mode(comm, argc, argv)
             : !std::strcmp(mode, "shrink-repeat") ? weft_test_rank::shrink_repeat(comm, argc, argv)
             : !std::strcmp(mode, "skip")        ? skip_or_mismatch(comm, true)
             : !std::strcmp(mode, "mismatch-small") ? skip_or_mismatch(comm, false)
             : !std::strcmp(mode, "dump")        ? dump_modes(comm)
             : !std::strcmp(mode, "metrics")     ? metrics(comm, argc > 2 ? argv[2] : "/tmp")
                                                 : expect_failure(comm, mode);
    std::fflush(stdout);
    if (std::strcmp(mode, "check") != 0 && std::strcmp(mode, "argerror") != 0 && std::strcmp(mode, "levels") != 0 &&
        std::strcmp(mode, "idle") != 0 && std::strcmp(mode, "shrink") != 0 && std::strcmp(mode, "shrink-repeat") != 0 &&
        std::strcmp(mode, "dump") != 0 && std::strcmp(mode, "metrics") != 0)
      _exit(rc);  // a broken communicator: leave without teardown
    return rc;
  } catch (const weft::Error& e) {
    std::printf("rank ?: FATAL %d %s\n", static_cast<int>(e.code()), e.what());
    return 2;
  }
}
