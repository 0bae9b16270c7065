// Starts N real processes of a program as the ranks of a job described by WEFT_* variables (no
// MPI), collects each one's exit status and output, and kills whatever outlives the deadline.
#pragma once
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
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

namespace weft::test {

struct RankResult {
  int status = -1;  // exit code, or 128+signal
  std::string output;
  double seconds = 0;
};

// Every rank's status and output, for a failed assertion's message.
inline std::string dump(const std::vector<RankResult>& rs) {
  std::string s;
  for (size_t r = 0; r < rs.size(); ++r)
    s += "--- rank " + std::to_string(r) + " status " + std::to_string(rs[r].status) + "\n" + rs[r].output;
  return s;
}

// A port for the job's store: below the kernel's ephemeral range (ip_local_port_range), so that
// no socket bound to port 0 meanwhile (UCX listeners of earlier tests' ranks still exiting,
// clients) can take it before rank 0 binds it, and free when picked. A random pick in 20000-50000
// overlapped the ephemeral range and once failed a CI run ("cannot bind 0.0.0.0:44132: Address
// already in use").
//
// The generator is seeded from std::random_device, the pid and the clock's nanoseconds: a seed of
// pid ^ seconds gave two test processes started a second apart with consecutive pids the same seed,
// hence the same port, and a CI run where one job's ranks joined the other's store.
inline int free_port() {
  static std::mt19937 rng([] {
    std::seed_seq seq{std::random_device{}(), static_cast<unsigned>(getpid()),
                      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count())};
    return std::mt19937(seq);
  }());
  int low = 32768;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int lo = 0, hi = 0;
    if (std::fscanf(f, "%d %d", &lo, &hi) == 2 && lo > 12000) low = lo;
    std::fclose(f);
  }
  for (int attempt = 0;; ++attempt) {
    const int port = 10000 + static_cast<int>(rng() % static_cast<unsigned>(low - 10000));
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return port;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    if (ok || attempt >= 50) return port;
  }
}

// A secret of the job's own (not derived from its port), so that ranks can never join another
// job's store by its port.
inline std::string job_secret() {
  static std::mt19937_64 rng(std::random_device{}());
  return "test-secret-" + std::to_string(getpid()) + "-" + std::to_string(rng());
}

// A job's processes while they run.
struct Job {
  std::vector<pid_t> pids;
  std::vector<int> fds;  // each rank's stdout and stderr
  std::chrono::steady_clock::time_point t0;
};

// Starts N ranks with the WEFT_* variables of a job whose store is at 127.0.0.1:port (served by
// rank 0 unless extra_env says WEFT_STORE_EXTERNAL=1). extra_env applies to every rank; rank_env's
// {rank, "KEY=VALUE"} entries to one rank only, after it.
inline Job start_job(int n, const std::vector<std::string>& argv, int port, const std::string& secret,
                     const std::vector<std::string>& extra_env = {},
                     const std::vector<std::pair<int, std::string>>& rank_env = {}) {
  Job job;
  job.pids.resize(n);
  job.fds.resize(n);
  job.t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (pipe(p) != 0) std::abort();
    pid_t pid = fork();
    if (pid == 0) {
      dup2(p[1], 1);
      dup2(p[1], 2);
      close(p[0]);
      close(p[1]);
      setenv("WEFT_RANK", std::to_string(r).c_str(), 1);
      setenv("WEFT_WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("WEFT_MASTER_ADDR", "127.0.0.1", 1);
      setenv("WEFT_MASTER_PORT", std::to_string(port).c_str(), 1);
      setenv("WEFT_JOB_SECRET", secret.c_str(), 1);
      for (auto& kv : extra_env) putenv(strdup(kv.c_str()));
      for (auto& [rank, kv] : rank_env)
        if (rank == r) putenv(strdup(kv.c_str()));
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    job.pids[r] = pid;
    job.fds[r] = p[0];
  }
  return job;
}

// Collects every rank's output and status; kills whatever outlives the deadline.
inline std::vector<RankResult> finish_job(Job& job, std::chrono::seconds deadline = std::chrono::seconds(120)) {
  const int n = static_cast<int>(job.pids.size());
  std::vector<RankResult> out(n);
  int left = n;
  std::vector<bool> done(n, false);
  while (left > 0) {
    char buf[4096];
    for (int r = 0; r < n; ++r) {
      ssize_t k;
      while ((k = read(job.fds[r], buf, sizeof buf)) > 0) out[r].output.append(buf, static_cast<size_t>(k));
    }
    for (int r = 0; r < n; ++r) {
      if (done[r]) continue;
      int st = 0;
      if (waitpid(job.pids[r], &st, WNOHANG) == job.pids[r]) {
        done[r] = true;
        --left;
        out[r].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        out[r].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - job.t0).count();
      }
    }
    if (std::chrono::steady_clock::now() - job.t0 > deadline) {
      for (int r = 0; r < n; ++r)
        if (!done[r]) kill(job.pids[r], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < n; ++r) {
    char buf[4096];
    ssize_t k;
    while ((k = read(job.fds[r], buf, sizeof buf)) > 0) out[r].output.append(buf, static_cast<size_t>(k));
    close(job.fds[r]);
  }
  return out;
}

// A job whose rank 0 serves the store (plain WEFT_* variables), run to the end.
inline std::vector<RankResult> run_job(int n, const std::vector<std::string>& argv,
                                       const std::vector<std::string>& extra_env = {},
                                       std::chrono::seconds deadline = std::chrono::seconds(120),
                                       const std::vector<std::pair<int, std::string>>& rank_env = {}) {
  // Ports are picked free but may be taken before rank 0 binds (another job's socket): then the
  // job is run again on another port, up to three times.
  for (int attempt = 0;; ++attempt) {
    Job job = start_job(n, argv, free_port(), job_secret(), extra_env, rank_env);
    auto rs = finish_job(job, deadline);
    const bool port_taken = !rs.empty() && rs[0].output.find("store server: cannot bind") != std::string::npos &&
                            rs[0].output.find("Address already in use") != std::string::npos;
    if (!port_taken || attempt == 2) return rs;
  }
}

}  // namespace weft::test
