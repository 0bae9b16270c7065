// Two processes as two "nodes" on one GPU: ranks 0 and 1 of a job with WEFT_NODE_ID node0 and
// node1, so each node's NCCL communicator has one rank (no duplicate-GPU problem) and the
// hierarchical all-reduce's inter-node phase goes through Weft's host path between them.
// Used by test_gpu and weft-gpu-check (which is also the child program: --hier-child).
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/spawn.h"

extern char** environ;

namespace weft::test {

struct ChildResult {
  int status = -1;  // exit status; -1 when killed at the timeout or not started
  std::string output;
};

inline std::string slurp(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

// Runs exe args... as the two ranks (WEFT_GPU_HIERARCHICAL=1, plus `env`), stdout and stderr of
// each captured; kills both after timeout_s.
inline std::vector<ChildResult> run_two_nodes(const std::string& exe, const std::vector<std::string>& args,
                                              const std::vector<std::pair<std::string, std::string>>& env, int timeout_s) {
  std::string port = std::to_string(free_port());
  std::vector<ChildResult> res(2);
  std::vector<pid_t> pids(2, -1);
  std::vector<std::string> logs(2);
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> vars = {"WEFT_RANK=" + std::to_string(r), "WEFT_WORLD_SIZE=2", "WEFT_MASTER_ADDR=127.0.0.1",
                                     "WEFT_MASTER_PORT=" + port, "WEFT_JOB_SECRET=gpu-two-nodes",
                                     "WEFT_NODE_ID=node" + std::to_string(r), "WEFT_GPU_HIERARCHICAL=1"};
    for (auto& [k, v] : env) vars.push_back(k + "=" + v);
    std::vector<std::string> envs;
    for (char** e = environ; *e; ++e) {
      std::string s(*e);
      bool overridden = false;
      for (auto& v : vars) overridden |= s.compare(0, v.find('=') + 1, v, 0, v.find('=') + 1) == 0;
      if (!overridden) envs.push_back(s);
    }
    envs.insert(envs.end(), vars.begin(), vars.end());
    std::vector<char*> envp, argv;
    for (auto& s : envs) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string exe_copy = exe;
    std::vector<std::string> args_copy = args;
    argv.push_back(exe_copy.data());
    for (auto& a : args_copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    char tmpl[] = "/tmp/weft-two-nodes-XXXXXX";
    int fd = mkstemp(tmpl);
    logs[r] = tmpl;
    pid_t pid = fork();
    if (pid == 0) {
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    if (fd >= 0) close(fd);
    pids[r] = pid;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int left = 2;
  while (left > 0) {
    for (int r = 0; r < 2; ++r) {
      if (pids[r] <= 0) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        res[r].status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        pids[r] = -1;
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < 2; ++r) {
        if (pids[r] <= 0) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        res[r].output = "(killed after " + std::to_string(timeout_s) + " s)\n";
        pids[r] = -1;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int r = 0; r < 2; ++r) {
    res[r].output += slurp(logs[r]);
    unlink(logs[r].c_str());
  }
  return res;
}

}  // namespace weft::test
