#include "runtime/trace/trace_registry.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "collectives/datatype.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/trace/flight_recorder.h"

namespace weft {

namespace {

std::atomic<int> g_signal_fd{-1};

// Async-signal-safe: one write() to a non-blocking pipe; the watch thread does the rest.
void on_sigusr1(int) {
  const int saved = errno;
  const int fd = g_signal_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const char b = 'u';
    ssize_t rc = ::write(fd, &b, 1);
    (void)rc;
  }
  errno = saved;
}

// Installs the SIGUSR1 handler unless the program has its own (then weftCommDump is the way);
// true when SIGUSR1 is the flight recorder's.
bool install_sigusr1(int write_fd) {
  g_signal_fd.store(write_fd);
  struct sigaction old {};
  if (sigaction(SIGUSR1, nullptr, &old) != 0) return false;
  if (old.sa_handler == on_sigusr1) return true;
  if (old.sa_handler != SIG_DFL) {
    WEFT_LOG_INFO("SIGUSR1 has a handler already: the flight recorder dumps on weftCommDump and on errors only");
    return false;
  }
  struct sigaction sa {};
  sa.sa_handler = on_sigusr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  return true;
}

sigset_t sigusr1_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  return set;
}

// A child forked by the program gets SIGUSR1 back (an exec'd program expects it unblocked).
void unblock_sigusr1_in_child() {
  const sigset_t set = sigusr1_set();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

// Asking for a dump must not change the program (a handler run on the program's thread cuts its
// sleep() or nanosleep() short, and a late rank then makes the call the doctor blames it for not
// making): SIGUSR1 is blocked in the thread that registers a communicator (so in the threads it
// starts afterwards: the watch thread, the progress thread) and taken by the watch thread from a
// signalfd. The handler stays for threads that do not block it (started before the first
// communicator). Returns the signalfd, or -1.
int take_sigusr1_on_watch_thread() {
  static const int fd = [] {
    pthread_atfork(nullptr, nullptr, unblock_sigusr1_in_child);
    const sigset_t set = sigusr1_set();
    return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  }();
  const sigset_t set = sigusr1_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return fd;
}

// A SIGUSR1 read from the signalfd when the program installed a handler of its own after the
// first communicator (faulthandler.register, say): it is the program's, not a dump request. Its
// handler runs here, on the watch thread (the program's threads block the signal); SIG_DFL ends
// the process as the signal would have. False: the handler is still the flight recorder's.
bool sigusr1_taken_over(const signalfd_siginfo& si) {
  struct sigaction cur {};
  if (sigaction(SIGUSR1, nullptr, &cur) != 0) return false;
  if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == on_sigusr1) return false;
  if (cur.sa_flags & SA_SIGINFO) {
    siginfo_t info{};
    info.si_signo = SIGUSR1;
    info.si_code = si.ssi_code;
    info.si_pid = static_cast<pid_t>(si.ssi_pid);
    info.si_uid = static_cast<uid_t>(si.ssi_uid);
    cur.sa_sigaction(SIGUSR1, &info, nullptr);
  } else if (cur.sa_handler == SIG_DFL) {
    const sigset_t set = sigusr1_set();
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    raise(SIGUSR1);
  } else if (cur.sa_handler != SIG_IGN) {
    cur.sa_handler(SIGUSR1);
  }
  return true;
}

// Steady-clock nanoseconds as microseconds of the system clock (comparable between ranks of a
// machine; across machines as far as their clocks agree).
struct WallClock {
  int64_t offset_ns;
  WallClock() {
    const int64_t wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
    offset_ns = wall - std::chrono::steady_clock::now().time_since_epoch().count();
  }
  double us(int64_t steady_ns) const { return steady_ns ? static_cast<double>(steady_ns + offset_ns) / 1e3 : 0.0; }
};

nlohmann::json record_json(const TraceRecord& r, const WallClock& clock) {
  nlohmann::json o;
  o["record"] = r.record;
  o["seq"] = r.seq;
  o["collective"] = std::string(collective_name(r.kind));
  o["count"] = r.count;
  o["dtype"] = std::string(dtype_name(r.dtype));
  const bool reducing = r.kind == CollectiveKind::kAllReduce || r.kind == CollectiveKind::kReduceScatter ||
                        r.kind == CollectiveKind::kReduce;
  o["op"] = reducing ? nlohmann::json(std::string(redop_name(r.op))) : nlohmann::json(nullptr);
  if (r.kind == CollectiveKind::kSend || r.kind == CollectiveKind::kRecv) o["peer"] = r.root;
  else if (r.kind == CollectiveKind::kBroadcast || r.kind == CollectiveKind::kReduce) o["root"] = r.root;
  o["algorithm"] = r.algorithm ? nlohmann::json(r.algorithm) : nlohmann::json(nullptr);
  o["state"] = trace_state_name(r.state);
  if (r.error) o["error"] = error_code_name(static_cast<ErrorCode>(r.error));
  o["queued_us"] = clock.us(r.queued_ns);
  o["started_us"] = clock.us(r.started_ns);
  o["finished_us"] = clock.us(r.finished_ns);
  if (r.started_ns && r.finished_ns) o["duration_us"] = static_cast<double>(r.finished_ns - r.started_ns) / 1e3;
  if ((r.state == TraceState::kStarted || r.state == TraceState::kFailed) && r.wait_peer >= 0) {
    nlohmann::json w{{"rank", r.wait_peer}};
    if (r.wait_total) {
      w["steps_done"] = r.wait_done;
      w["steps"] = r.wait_total;
    }
    o["waiting_on"] = w;
  }
  return o;
}

std::string host_name_or_empty() {
  char h[256] = {};
  if (gethostname(h, sizeof h - 1) != 0) return "";
  return h;
}

// mkdir -p
bool make_dirs(const std::string& dir) {
  std::string part;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!part.empty() && ::mkdir(part.c_str(), 0777) != 0 && errno != EEXIST) return false;
    }
    if (i < dir.size()) part += dir[i];
  }
  return true;
}

}  // namespace

TraceRegistry& TraceRegistry::instance() {
  // Never destroyed: the watch thread and late dumps (an error during exit) must find it.
  static TraceRegistry* r = new TraceRegistry();
  return *r;
}

uint64_t TraceRegistry::attach(TraceSource source) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t h = next_handle_++;
  entries_.push_back({h, std::move(source), false});
  if (!thread_.joinable()) start_locked();
  return h;
}

void TraceRegistry::detach(uint64_t handle) {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.handle == handle; }),
                   entries_.end());
    last = entries_.empty();
  }
  if (last) stop();
}

void TraceRegistry::set_world(const std::string& job, int world_rank) {
  std::lock_guard<std::mutex> lock(mu_);
  job_ = job;
  world_rank_ = world_rank;
}

void TraceRegistry::start_locked() {
  if (pipe_[0] < 0) {
    if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
      pipe_[0] = pipe_[1] = -1;
      WEFT_LOG_WARN("flight recorder: pipe2: {}", std::strerror(errno));
      return;
    }
    owns_sigusr1_ = install_sigusr1(pipe_[1]);
  }
  if (owns_sigusr1_) signal_fd_ = take_sigusr1_on_watch_thread();
  const uint64_t generation = ++generation_;
  // The thread gets its own copy of the signalfd: a thread of an older generation may still be
  // polling while this start writes signal_fd_ (ThreadSanitizer saw it: thread-ranks attaching
  // while the last one's watch thread ended).
  const int signal_fd = signal_fd_;
  thread_ = std::thread([this, generation, signal_fd] { watch(generation, signal_fd); });
}

void TraceRegistry::stop() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!entries_.empty() || !thread_.joinable()) return;
    ++generation_;  // that thread's generation is over, whatever starts meanwhile
    t = std::move(thread_);
  }
  if (pipe_[1] >= 0) {
    const char b = 's';
    ssize_t rc = ::write(pipe_[1], &b, 1);
    (void)rc;
  }
  if (t.get_id() == std::this_thread::get_id()) t.detach();
  else t.join();
}

// Wakes on SIGUSR1 (from the signalfd, or a byte in the pipe from the handler) or every half second to ask whether another rank published
// a failure: a rank busy in its own code (or waiting on something else) then still writes its dump
// while the job's other ranks write theirs.
//
// A thread ends when its generation does, not on a shared flag: a communicator attached while the
// last one's detach was stopping the thread starts a new one at once, and a flag reset by that
// start left the old thread running and its join in detach() (so destroy()) waiting for ever
// (seen with thread-ranks: one rank destroyed its communicator before the others had attached).
void TraceRegistry::watch(uint64_t generation, int signal_fd) {
  for (;;) {
    pollfd p[2] = {{pipe_[0], POLLIN, 0}, {signal_fd, POLLIN, 0}};
    const int rc = ::poll(p, signal_fd >= 0 ? 2 : 1, 500);
    bool signalled = false;
    if (rc > 0) {
      char buf[64];
      ssize_t n;
      while ((n = ::read(pipe_[0], buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; ++i) signalled |= buf[i] == 'u';
      signalfd_siginfo si;
      while (signal_fd >= 0 && ::read(signal_fd, &si, sizeof si) == static_cast<ssize_t>(sizeof si))
        signalled |= !sigusr1_taken_over(si);
    }
    std::vector<std::pair<uint64_t, std::function<std::string()>>> polls;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (generation_ != generation) return;
      for (const Entry& e : entries_) {
        // A broken communicator dumped when its own operation failed.
        if (e.remote_dumped || !e.source.remote_failure || (e.source.broken && !e.source.broken().empty())) continue;
        polls.emplace_back(e.handle, e.source.remote_failure);
      }
    }
    if (signalled) dump("SIGUSR1");
    // Outside the lock: a store question may take a while, and a communicator may detach meanwhile.
    std::string cause;
    for (auto& [handle, ask] : polls) {
      std::string why;
      try {
        why = ask();
      } catch (const std::exception& e) {
        why = fmt::format("the job's store is unreachable ({})", e.what());
      }
      if (why.empty()) continue;
      std::lock_guard<std::mutex> lock(mu_);
      for (Entry& e : entries_)
        if (e.handle == handle && !e.remote_dumped) {
          e.remote_dumped = true;
          cause = fmt::format("another rank failed on {}: {}", e.source.name, why);
        }
    }
    if (!cause.empty()) dump(cause);
  }
}

std::string TraceRegistry::dir() {
  if (const char* d = std::getenv("WEFT_DUMP_DIR"); d && *d) return d;
  std::lock_guard<std::mutex> lock(mu_);
  return fmt::format("/tmp/weft-dumps/{}", job_.empty() ? fmt::format("pid{}", getpid()) : job_);
}

std::string TraceRegistry::path_locked() {
  const char* d = std::getenv("WEFT_DUMP_DIR");
  const std::string dir = d && *d ? std::string(d)
                                  : fmt::format("/tmp/weft-dumps/{}", job_.empty() ? fmt::format("pid{}", getpid()) : job_);
  return world_rank_ >= 0 ? fmt::format("{}/rank{}.json", dir, world_rank_) : fmt::format("{}/pid{}.json", dir, getpid());
}

std::string TraceRegistry::path() {
  std::lock_guard<std::mutex> lock(mu_);
  return path_locked();
}

nlohmann::json TraceRegistry::to_json(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  return to_json_locked(reason);
}

nlohmann::json TraceRegistry::to_json_locked(const std::string& reason) {
  const WallClock clock;
  nlohmann::json out;
  out["weft_flight_recorder"] = 1;
  out["reason"] = reason;
  out["pid"] = getpid();
  out["host"] = host_name_or_empty();
  out["world_rank"] = world_rank_;
  out["job"] = job_;
  out["time_us"] = clock.us(std::chrono::steady_clock::now().time_since_epoch().count());
  nlohmann::json comms = nlohmann::json::array();
  for (const Entry& e : entries_) {
    const TraceSource& s = e.source;
    nlohmann::json c;
    c["name"] = s.name;
    c["rank"] = s.rank;
    c["size"] = s.size;
    c["broken"] = s.broken ? s.broken() : std::string();
    c["last_error"] = s.last_error ? s.last_error() : std::string();
    nlohmann::json ops = nlohmann::json::array();
    if (s.recorder) {
      c["buffer"] = s.recorder->capacity();
      c["recorded"] = s.recorder->recorded();
      for (const TraceRecord& r : s.recorder->snapshot()) ops.push_back(record_json(r, clock));
    }
    c["ops"] = std::move(ops);
    comms.push_back(std::move(c));
  }
  out["communicators"] = std::move(comms);
  return out;
}

TraceRegistry::Window TraceRegistry::window(const std::string& name, uint64_t from) {
  Window w;
  w.next = from;
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : entries_) {
    if (e.source.name != name || !e.source.recorder) continue;
    for (const TraceRecord& r : e.source.recorder->snapshot()) {
      if (r.record < from) continue;
      w.last_launch_ns = std::max(w.last_launch_ns, r.queued_ns ? r.queued_ns : r.started_ns);
      w.last_finish_ns = std::max(w.last_finish_ns, r.finished_ns);
      w.next = std::max(w.next, r.record + 1);
    }
  }
  return w;
}

std::string TraceRegistry::dump(const std::string& reason) {
  std::lock_guard<std::mutex> write_lock(write_mu_);
  std::string path, text;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.empty()) return "";
    path = path_locked();
    text = to_json_locked(reason).dump(1);
  } catch (const std::exception& e) {
    WEFT_LOG_WARN("flight recorder: could not build the dump: {}", e.what());
    return "";
  }
  const std::string dir = path.substr(0, path.rfind('/'));
  const std::string tmp = fmt::format("{}.tmp{}", path, getpid());
  if (!make_dirs(dir)) {
    WEFT_LOG_WARN("flight recorder: cannot create {}: {}", dir, std::strerror(errno));
    return "";
  }
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text << '\n';
    f.close();
    if (!f) {
      WEFT_LOG_WARN("flight recorder: cannot write {}", tmp);
      ::unlink(tmp.c_str());
      return "";
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    WEFT_LOG_WARN("flight recorder: cannot rename {} to {}: {}", tmp, path, std::strerror(errno));
    ::unlink(tmp.c_str());
    return "";
  }
  WEFT_LOG_INFO("flight recorder written to {} ({})", path, reason);
  return path;
}

}  // namespace weft
