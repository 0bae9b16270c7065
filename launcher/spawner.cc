#include "launcher/spawner.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

namespace weft::launcher {
namespace {

sigset_t g_original_mask;
bool g_blocked = false;

sigset_t job_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  return set;
}

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

void say(const std::string& message) { write_all(STDERR_FILENO, "weftrun: " + message + "\n"); }

int exit_code_of(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

// One relayed output stream of one process.
struct Stream {
  int fd = -1;      // read end; -1 once closed
  int out_fd = 1;   // where its lines go
  std::string tag;
  std::string partial;

  void emit(bool final) {
    size_t start = 0;
    for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      write_all(out_fd, tag + partial.substr(start, nl + 1 - start));
    }
    partial.erase(0, start);
    if ((final && !partial.empty()) || partial.size() > (1 << 16)) {
      write_all(out_fd, tag + partial + "\n");
      partial.clear();
    }
  }
  // Reads what is there; closes on EOF or error.
  void pump() {
    char buf[8192];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        partial.append(buf, static_cast<size_t>(n));
        emit(false);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      ::close(fd);
      fd = -1;
      emit(true);
      return;
    }
  }
};

struct Child {
  pid_t pid = -1;
  bool alive = false;
  Stream out, err;
};

using Clock = std::chrono::steady_clock;

// Forks and execs one process; returns its pid, or -1 (after saying why).
pid_t start(const ProcessSpec& spec, Child& child, bool tag) {
  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : spec.cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &cpus);
  }
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (tag && (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)) {
    say(fmt::format("cannot create pipes for {}: {}", spec.label, std::strerror(errno)));
    return -1;
  }
  int devnull = spec.inherit_stdin ? -1 : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls from here to exec.
    ::setpgid(0, 0);
    // If weftrun itself is killed (SIGKILL: no chance to tear down), its ranks go with it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(128 + SIGKILL);
    if (!spec.cpus.empty() && ::sched_setaffinity(0, sizeof cpus, &cpus) != 0) {
      write_all(STDERR_FILENO, "weftrun: warning: sched_setaffinity failed; running unbound\n");
    }
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    if (tag) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
    }
    ::sigprocmask(SIG_SETMASK, &g_original_mask, nullptr);
    ::execve(spec.path.c_str(), argv.data(), envp.data());
    int e = errno;
    write_all(STDERR_FILENO, "weftrun: cannot execute ");
    write_all(STDERR_FILENO, spec.path);
    write_all(STDERR_FILENO, ": ");
    write_all(STDERR_FILENO, std::strerror(e));
    write_all(STDERR_FILENO, "\n");
    ::_exit(127);
  }
  if (devnull >= 0) ::close(devnull);
  if (pid < 0) {
    say(fmt::format("cannot start {}: fork: {}", spec.label, std::strerror(errno)));
    for (int fd : {out[0], out[1], err[0], err[1]}) {
      if (fd >= 0) ::close(fd);
    }
    return -1;
  }
  ::setpgid(pid, pid);  // also in the parent, so that signalling the group cannot race the child
  child.pid = pid;
  child.alive = true;
  if (tag) {
    ::close(out[1]);
    ::close(err[1]);
    child.out = Stream{out[0], STDOUT_FILENO, spec.tag, {}};
    child.err = Stream{err[0], STDERR_FILENO, spec.tag, {}};
    for (int fd : {out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return pid;
}

// The status of a --keep-going job in which some processes failed (see spawner.h), and its summary.
int keep_going_status(const std::vector<int>& statuses, const std::vector<std::string>& lost) {
  int finished = 0, first_exit = 0, first_signal = 0;
  for (int st : statuses) {
    if (st < 0) continue;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) finished++;
    else if (WIFEXITED(st) && !first_exit) first_exit = WEXITSTATUS(st);
    else if (WIFSIGNALED(st) && !first_signal) first_signal = exit_code_of(st);
  }
  const int result = first_exit ? first_exit : finished > 0 ? kFinishedWithLostRanks : first_signal;
  std::string names;
  for (const std::string& l : lost) names += (names.empty() ? "" : "; ") + l;
  say(fmt::format("--keep-going: {} of {} ranks finished with status 0; lost: {}; exit status {}", finished, statuses.size(), names,
                  result));
  return result;
}

}  // namespace

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return fmt::format("was killed by signal {} ({})", sig, strsignal(sig));
  }
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

void block_job_signals() {
  sigset_t set = job_signals();
  ::pthread_sigmask(SIG_BLOCK, &set, &g_original_mask);
  g_blocked = true;
}

namespace {

// One supervised job: its processes, the signalfd, and the timers of a stop in progress.
class Supervisor {
 public:
  Supervisor(const std::vector<ProcessSpec>& procs, const SuperviseOptions& opts, int sfd)
      : procs_(procs), opts_(opts), sfd_(sfd), children_(procs.size()), statuses_(procs.size(), -1) {
    if (opts.timeout_s > 0)
      timeout_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts.timeout_s));
  }
  int run();

 private:
  size_t alive_count() const {
    size_t n = 0;
    for (const Child& c : children_) n += c.alive ? 1 : 0;
    return n;
  }
  void signal_all(int sig) const {
    for (const Child& c : children_)
      if (c.pid > 0) ::kill(-c.pid, sig);  // the whole group, leader gone or not
  }
  void begin_stop(int code, int sig) {
    stopping_ = true;
    result_ = code;
    signal_all(sig);
    kill_at_ = Clock::now() + opts_.grace;
  }
  // A failure: the other ranks get dump_signal first (their flight recorders), SIGTERM later.
  void begin_failure_stop(int code) {
    if (!opts_.dump_signal) return begin_stop(code, SIGTERM);
    stopping_ = true;
    result_ = code;
    for (const Child& c : children_)
      if (c.alive && c.pid > 0) ::kill(c.pid, opts_.dump_signal);
    term_at_ = Clock::now() + opts_.dump_wait;
  }
  void start_all();
  // Waits for output, a signal or the next timer and relays what came; false when poll failed.
  bool relay_output();
  void take_signals();
  void reap();
  void on_exit(size_t i, pid_t pid, int status);
  void check_timers();
  void flush_streams();

  const std::vector<ProcessSpec>& procs_;
  const SuperviseOptions& opts_;
  int sfd_;
  std::vector<Child> children_;
  bool stopping_ = false;  // teardown started: later exits are consequences, not causes
  int result_ = 0;
  std::vector<int> statuses_;  // how the processes ended (-1: still running or not started)
  std::vector<std::string> lost_;  // --keep-going: "rank 1 (pid 123) was killed by signal 9 (Killed) after 1.2 s"
  const Clock::time_point started_ = Clock::now();
  Clock::time_point kill_at_ = Clock::time_point::max(), timeout_at_ = Clock::time_point::max(),
                    term_at_ = Clock::time_point::max();
};

void Supervisor::start_all() {
  for (size_t i = 0; i < procs_.size(); ++i) {
    if (start(procs_[i], children_[i], opts_.tag_output) < 0) {
      if (!stopping_) begin_stop(127, SIGTERM);
      break;
    }
    if (opts_.verbose) say(fmt::format("started {} (pid {})", procs_[i].label, children_[i].pid));
  }
}

bool Supervisor::relay_output() {
  std::vector<pollfd> fds{{sfd_, POLLIN, 0}};
  std::vector<Stream*> streams;
  for (Child& c : children_) {
    for (Stream* s : {&c.out, &c.err}) {
      if (s->fd >= 0) {
        fds.push_back({s->fd, POLLIN, 0});
        streams.push_back(s);
      }
    }
  }
  const auto next = std::min({kill_at_, timeout_at_, term_at_});
  int wait_ms = -1;
  if (next != Clock::time_point::max()) {
    wait_ms = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count() + 1));
  }
  if (::poll(fds.data(), fds.size(), wait_ms) < 0) return errno == EINTR;
  for (size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents) streams[i - 1]->pump();
  }
  return true;
}

void Supervisor::take_signals() {
  signalfd_siginfo si;
  while (::read(sfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
    int sig = static_cast<int>(si.ssi_signo);
    if (sig == SIGCHLD) continue;  // reaped below
    if (!stopping_) {
      say(fmt::format("got {}; forwarding it to every rank", sigabbrev_np(sig) ? sigabbrev_np(sig) : "a signal"));
      begin_stop(128 + sig, sig);
    } else {
      say("got a second signal; killing every rank now");
      signal_all(SIGKILL);
      kill_at_ = Clock::time_point::max();
    }
  }
}

void Supervisor::on_exit(size_t i, pid_t pid, int status) {
  children_[i].alive = false;
  statuses_[i] = status;
  if (opts_.on_exit) opts_.on_exit(i, status);
  const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (opts_.verbose) say(fmt::format("{} (pid {}) {}", procs_[i].label, pid, describe_exit(status)));
  if (!failed || stopping_) return;
  if (opts_.keep_going) {
    const double after = std::chrono::duration<double>(Clock::now() - started_).count();
    lost_.push_back(fmt::format("{} (pid {}) {} after {:.1f} s", procs_[i].label, pid, describe_exit(status), after));
    say(fmt::format("{}{}", lost_.back(), alive_count() > 0 ? "; the other ranks keep running (--keep-going)" : ""));
    ::kill(-pid, SIGKILL);  // what it started in its process group goes with it
    return;
  }
  say(fmt::format("{} (pid {}) {}{}", procs_[i].label, pid, describe_exit(status),
                  alive_count() > 0 ? "; stopping the other ranks" : ""));
  begin_failure_stop(exit_code_of(status));
}

void Supervisor::reap() {
  int status;
  for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;)
    for (size_t i = 0; i < children_.size(); ++i)
      if (children_[i].pid == pid) on_exit(i, pid, status);
}

void Supervisor::check_timers() {
  const auto now = Clock::now();
  if (!stopping_ && now >= timeout_at_) {
    say(fmt::format("the job ran past --timeout {}s; stopping every rank", opts_.timeout_s));
    begin_failure_stop(124);
  }
  if (now >= term_at_) {
    term_at_ = Clock::time_point::max();
    signal_all(SIGTERM);
    kill_at_ = now + opts_.grace;
  }
  if (stopping_ && now >= kill_at_ && alive_count() > 0) {
    for (size_t i = 0; i < children_.size(); ++i) {
      if (children_[i].alive) say(fmt::format("{} (pid {}) did not stop; killing it", procs_[i].label, children_[i].pid));
    }
    signal_all(SIGKILL);
    kill_at_ = Clock::time_point::max();
  }
}

void Supervisor::flush_streams() {
  for (Child& c : children_) {
    for (Stream* s : {&c.out, &c.err}) {
      if (s->fd >= 0) {
        s->pump();
        if (s->fd >= 0) {  // a grandchild still holds the pipe: flush what came and let go
          ::close(s->fd);
          s->fd = -1;
          s->emit(true);
        }
      }
    }
  }
}

int Supervisor::run() {
  start_all();
  while (alive_count() > 0) {
    if (!relay_output()) break;
    take_signals();
    reap();
    check_timers();
  }
  // Leftovers: whatever a failed job's ranks started in their groups goes too.
  if (stopping_) signal_all(SIGKILL);
  if (!stopping_ && !lost_.empty()) result_ = keep_going_status(statuses_, lost_);
  flush_streams();
  if (opts_.statuses) *opts_.statuses = statuses_;
  return result_;
}

}  // namespace

int supervise(const std::vector<ProcessSpec>& procs, const SuperviseOptions& opts) {
  if (!g_blocked) block_job_signals();
  sigset_t set = job_signals();
  int sfd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    say(fmt::format("signalfd: {}", std::strerror(errno)));
    return 1;
  }
  const int result = Supervisor(procs, opts, sfd).run();
  ::close(sfd);
  return result;
}

}  // namespace weft::launcher
