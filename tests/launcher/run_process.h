// Test helper: runs a command with its stdout and stderr captured, with a deadline.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

namespace weft::test {

struct Running {
  pid_t pid = -1;
  int out = -1, err = -1;
  std::chrono::steady_clock::time_point started;
};

struct Finished {
  int status = -1;  // exit code, or 128+signal
  std::string out, err;
  double seconds = 0;
  bool timed_out = false;
};

inline Running start_process(const std::vector<std::string>& argv) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return {};
  Running r;
  r.started = std::chrono::steady_clock::now();
  r.pid = fork();
  if (r.pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(126);
  }
  close(out[1]);
  close(err[1]);
  r.out = out[0];
  r.err = err[0];
  return r;
}

// Reads until both streams close and the process exits; SIGKILLs it after timeout_s.
inline Finished finish_process(Running& r, double timeout_s = 60) {
  Finished f;
  auto deadline = r.started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(timeout_s));
  std::string* sinks[2] = {&f.out, &f.err};
  int fds[2] = {r.out, r.err};
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      f.timed_out = true;
      kill(r.pid, SIGKILL);
      break;
    }
    poll(p, 2, static_cast<int>(left.count()));
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || !p[i].revents) continue;
      char buf[4096];
      ssize_t n = read(fds[i], buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
  int status = 0;
  waitpid(r.pid, &status, 0);
  f.status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - r.started).count();
  return f;
}

inline Finished run_process(const std::vector<std::string>& argv, double timeout_s = 60) {
  Running r = start_process(argv);
  return finish_process(r, timeout_s);
}

}  // namespace weft::test
