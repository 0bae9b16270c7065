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

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return fmt::format("was killed by signal {} ({})", sig, strsignal(sig));
  }
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

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

void block_job_signals() {
  sigset_t set = job_signals();
  ::pthread_sigmask(SIG_BLOCK, &set, &g_original_mask);
  g_blocked = true;
}

int supervise(const std::vector<ProcessSpec>& procs, const SuperviseOptions& opts) {
  if (!g_blocked) block_job_signals();
  sigset_t set = job_signals();
  int sfd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    say(fmt::format("signalfd: {}", std::strerror(errno)));
    return 1;
  }
  std::vector<Child> children(procs.size());
  bool stopping = false;  // teardown started: later exits are consequences, not causes
  int result = 0;
  // --keep-going: how the processes ended (-1: still running or not started).
  std::vector<int> statuses(procs.size(), -1);
  std::vector<std::string> lost;  // "rank 1 (pid 123) was killed by signal 9 (Killed) after 1.2 s"
  const auto started = Clock::now();
  Clock::time_point kill_at = Clock::time_point::max();
  Clock::time_point timeout_at = Clock::time_point::max();
  if (opts.timeout_s > 0) {
    timeout_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts.timeout_s));
  }
  auto alive_count = [&] {
    size_t n = 0;
    for (const Child& c : children) n += c.alive ? 1 : 0;
    return n;
  };
  auto signal_all = [&](int sig) {
    for (const Child& c : children) {
      if (c.pid > 0) ::kill(-c.pid, sig);  // the whole group, leader gone or not
    }
  };
  auto begin_stop = [&](int code, int sig) {
    stopping = true;
    result = code;
    signal_all(sig);
    kill_at = Clock::now() + opts.grace;
  };
  // A failure: the other ranks get dump_signal first (their flight recorders), SIGTERM later.
  Clock::time_point term_at = Clock::time_point::max();
  auto begin_failure_stop = [&](int code) {
    if (!opts.dump_signal) return begin_stop(code, SIGTERM);
    stopping = true;
    result = code;
    for (const Child& c : children)
      if (c.alive && c.pid > 0) ::kill(c.pid, opts.dump_signal);
    term_at = Clock::now() + opts.dump_wait;
  };

  for (size_t i = 0; i < procs.size(); ++i) {
    if (start(procs[i], children[i], opts.tag_output) < 0) {
      if (!stopping) begin_stop(127, SIGTERM);
      break;
    }
    if (opts.verbose) say(fmt::format("started {} (pid {})", procs[i].label, children[i].pid));
  }

  while (alive_count() > 0) {
    std::vector<pollfd> fds{{sfd, POLLIN, 0}};
    std::vector<Stream*> streams;
    for (Child& c : children) {
      for (Stream* s : {&c.out, &c.err}) {
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
      }
    }
    auto now = Clock::now();
    auto next = std::min({kill_at, timeout_at, term_at});
    int wait_ms = -1;
    if (next != Clock::time_point::max()) {
      wait_ms = static_cast<int>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1));
    }
    int n = ::poll(fds.data(), fds.size(), wait_ms);
    if (n < 0 && errno != EINTR) break;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents) streams[i - 1]->pump();
    }
    signalfd_siginfo si;
    while (::read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      int sig = static_cast<int>(si.ssi_signo);
      if (sig == SIGCHLD) continue;  // reaped below
      if (!stopping) {
        say(fmt::format("got {}; forwarding it to every rank", sigabbrev_np(sig) ? sigabbrev_np(sig) : "a signal"));
        begin_stop(128 + sig, sig);
      } else {
        say("got a second signal; killing every rank now");
        signal_all(SIGKILL);
        kill_at = Clock::time_point::max();
      }
    }
    int status;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      for (size_t i = 0; i < children.size(); ++i) {
        if (children[i].pid != pid) continue;
        children[i].alive = false;
        statuses[i] = status;
        bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (opts.verbose) say(fmt::format("{} (pid {}) {}", procs[i].label, pid, describe_status(status)));
        if (failed && !stopping && opts.keep_going) {
          const double after = std::chrono::duration<double>(Clock::now() - started).count();
          lost.push_back(fmt::format("{} (pid {}) {} after {:.1f} s", procs[i].label, pid, describe_status(status), after));
          say(fmt::format("{}{}", lost.back(), alive_count() > 0 ? "; the other ranks keep running (--keep-going)" : ""));
          ::kill(-pid, SIGKILL);  // what it started in its process group goes with it
        } else if (failed && !stopping) {
          bool others = alive_count() > 0;
          say(fmt::format("{} (pid {}) {}{}", procs[i].label, pid, describe_status(status),
                          others ? "; stopping the other ranks" : ""));
          begin_failure_stop(exit_code_of(status));
        }
      }
    }
    now = Clock::now();
    if (!stopping && now >= timeout_at) {
      say(fmt::format("the job ran past --timeout {}s; stopping every rank", opts.timeout_s));
      begin_failure_stop(124);
    }
    if (now >= term_at) {
      term_at = Clock::time_point::max();
      signal_all(SIGTERM);
      kill_at = now + opts.grace;
    }
    if (stopping && now >= kill_at && alive_count() > 0) {
      for (size_t i = 0; i < children.size(); ++i) {
        if (children[i].alive) say(fmt::format("{} (pid {}) did not stop; killing it", procs[i].label, children[i].pid));
      }
      signal_all(SIGKILL);
      kill_at = Clock::time_point::max();
    }
  }
  // Leftovers: whatever a failed job's ranks started in their groups goes too.
  if (stopping) signal_all(SIGKILL);
  if (!stopping && !lost.empty()) result = keep_going_status(statuses, lost);
  for (Child& c : children) {
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
  ::close(sfd);
  return result;
}

}  // namespace weft::launcher
