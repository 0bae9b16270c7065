// A stand-in rank for the weftrun tests: prints how it was launched, can prove the store works,
// and can fail on purpose. It does not use the collectives.
//   rank_probe [--store] [--exit-rank R --exit-code C] [--kill-rank R] [--sleep S]
//              [--pid-dir DIR] [--marker WORD] [--ignore-term]
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "launcher/binding.h"
#include "runtime/bootstrap/job_env.h"
#include "runtime/store/tcp_store.h"

namespace {

std::string env_or(const char* name, const char* fallback = "-") {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  bool use_store = false;
  int exit_rank = -1, exit_code = 0, kill_rank = -1;
  double sleep_s = 0;
  std::string pid_dir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--store") use_store = true;
    else if (a == "--exit-rank") exit_rank = std::stoi(next());
    else if (a == "--exit-code") exit_code = std::stoi(next());
    else if (a == "--kill-rank") kill_rank = std::stoi(next());
    else if (a == "--sleep") sleep_s = std::stod(next());
    else if (a == "--pid-dir") pid_dir = next();
    else if (a == "--marker") next();
    else if (a == "--ignore-term") signal(SIGTERM, SIG_IGN);
  }
  weft::JobInfo job;
  try {
    job = weft::detect_job(weft::process_env());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank_probe: %s\n", e.what());
    return 90;
  }
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  std::printf("probe rank=%d size=%d local_rank=%d local_size=%d launcher=%s master=%s:%d secret_len=%zu external=%d "
              "timeline=%s cuda=%s ucx=%s cpus=%s pgid_is_pid=%d torch=%s:%s:%s:%s\n",
              job.rank, job.size, job.local_rank, job.local_size, weft::launcher_name(job.launcher),
              job.master_addr.c_str(), job.master_port, job.secret.size(), job.store_external ? 1 : 0,
              env_or("WEFT_TIMELINE").c_str(), env_or("CUDA_VISIBLE_DEVICES").c_str(),
              env_or("UCX_NET_DEVICES").c_str(), weft::launcher::format_cpu_list(cpus).c_str(),
              getpgrp() == getpid() ? 1 : 0, env_or("RANK").c_str(), env_or("WORLD_SIZE").c_str(),
              env_or("MASTER_ADDR").c_str(), env_or("MASTER_PORT").c_str());
  std::fflush(stdout);
  if (!pid_dir.empty()) {
    std::ofstream(pid_dir + "/rank" + std::to_string(job.rank) + ".pid") << getpid() << "\n";
  }
  if (use_store) {
    try {
      weft::TcpStore store(job.master_addr, job.master_port, job.secret, weft::Millis(20000));
      store.set("probe/" + std::to_string(job.rank), weft::to_bytes("hello from " + std::to_string(job.rank)));
      std::vector<std::string> keys;
      for (int r = 0; r < job.size; ++r) keys.push_back("probe/" + std::to_string(r));
      store.wait(keys, weft::Millis(20000));
      for (int r = 0; r < job.size; ++r) {
        if (weft::to_string(store.get(keys[r], weft::Millis(1000))) != "hello from " + std::to_string(r)) {
          std::fprintf(stderr, "rank_probe: wrong value for %s\n", keys[r].c_str());
          return 91;
        }
      }
      std::printf("store ok rank=%d peers=%d\n", job.rank, job.size);
      std::fflush(stdout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank_probe: store: %s\n", e.what());
      return 92;
    }
  }
  if (job.rank == kill_rank) {
    usleep(100 * 1000);
    kill(getpid(), SIGKILL);
  }
  if (job.rank == exit_rank) {
    usleep(100 * 1000);
    return exit_code;
  }
  if (sleep_s > 0) usleep(static_cast<useconds_t>(sleep_s * 1e6));
  std::printf("finished rank=%d\n", job.rank);
  return 0;
}
