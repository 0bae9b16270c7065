// Jobs of real processes whose store this test process serves, as weftrun does (rank 0 is then
// no more special than any other rank: it may die too), with a watcher that can act while the
// ranks run (e.g. kill one when a store key shows that it reached some step).
#pragma once
#include <functional>
#include <thread>

#include "runtime/store/tcp_store.h"
#include "support/spawn.h"

namespace weft::test {

// watch(pids, store) runs on its own thread while the job runs, with a client of the job's store.
using JobWatch = std::function<void(const std::vector<pid_t>&, Store&)>;

inline std::vector<RankResult> run_job_store_outside(int n, const std::vector<std::string>& argv,
                                                     std::vector<std::string> extra_env = {}, const JobWatch& watch = {},
                                                     std::chrono::seconds deadline = std::chrono::seconds(120)) {
  const std::string secret = "test-secret-outside";
  TcpStoreServer server(secret, "127.0.0.1", 0);
  extra_env.push_back("WEFT_STORE_EXTERNAL=1");
  Job job = start_job(n, argv, server.port(), secret, extra_env);
  std::thread watcher;
  if (watch) {
    watcher = std::thread([&] {
      TcpStore client("127.0.0.1", server.port(), secret, std::chrono::milliseconds(10000));
      watch(job.pids, client);
    });
  }
  auto out = finish_job(job, deadline);
  if (watcher.joinable()) watcher.join();
  return out;
}

// A watch that SIGKILLs rank `victim` as soon as `kill_key` exists in the store, and records when
// (system clock, ms; -1 if the key never came). With a stop_key, it first SIGSTOPs the victim as
// soon as that key exists, so that the victim is frozen at a known step until it is killed (e.g.
// it joined a shrink, and dies only once the others build the communicator with it). Keys are
// polled every ms, for at most 60 s, while the victim lives.
inline JobWatch kill_when_key(int victim, std::string kill_key, long long* killed_at, std::string stop_key = "") {
  return [victim, kill_key = std::move(kill_key), stop_key = std::move(stop_key), killed_at](const std::vector<pid_t>& pids,
                                                                                             Store& store) {
    *killed_at = -1;
    const pid_t pid = pids[static_cast<size_t>(victim)];
    auto await = [&](const std::string& key) {
      for (int i = 0; i < 60000 && kill(pid, 0) == 0; ++i) {  // until the key comes, or the victim is gone
        if (store.check(key)) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      return false;
    };
    if (!stop_key.empty()) {
      if (!await(stop_key)) return;
      kill(pid, SIGSTOP);
    }
    if (!await(kill_key)) {
      kill(pid, SIGKILL);  // never leave it stopped
      return;
    }
    kill(pid, SIGKILL);
    *killed_at = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  };
}

}  // namespace weft::test
