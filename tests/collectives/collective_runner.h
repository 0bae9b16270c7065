// Runs lists of collective cases through real communicators (thread-ranks, see
// support/multirank.h) and checks every rank's buffers with collective_check.h. A failing rank
// records a test failure and carries on, so the other ranks are never left waiting.
#pragma once
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "collective_check.h"
#include "support/multirank.h"

namespace weft::test {

struct AlgoChoice {
  std::string id;
  int channels = 1;
  std::string label() const { return channels > 1 ? id + "x" + std::to_string(channels) : id; }
};

// Every (algorithm, channels) worth testing for kind: each registered algorithm, and the ring
// all-reduce with 2 and 3 channels.
inline std::vector<AlgoChoice> algo_choices(CollectiveKind kind) {
  std::vector<AlgoChoice> out;
  for (const Algorithm* a : algorithms_for(kind)) {
    if (a->native()) continue;  // no schedule: test_shm_direct and the process tests run them
    out.push_back({a->id, 1});
    if (kind == CollectiveKind::kAllReduce && std::string(a->id) == "ring") {
      out.push_back({a->id, 2});
      out.push_back({a->id, 3});
    }
  }
  return out;
}

// Runs every case (all with the same n) on one world whose communicators force `algo`.
// node_ids: each rank's node identity (default: all on one node).
inline void run_cases(TransportKind transport, const AlgoChoice& algo, int n, const std::vector<CollCase>& cases,
                      const std::vector<std::string>& node_ids = {}) {
  CommConfig cfg = test_config();
  cfg.algo = algo.id;
  cfg.channels = algo.channels;
  std::atomic<int> failures{0};
  run_ranks(
      n, transport,
      [&](Communicator& comm) {
        for (const CollCase& c : cases) {
          RankBuffers b = make_buffers(c, comm.rank());
          CollectiveArgs a{c.kind, c.count, c.dt, c.op, c.root, false};
          comm.submit(a, b.send, b.recv);
          if (c.kind == CollectiveKind::kBarrier) continue;
          std::string err = check_buffers(c, comm.rank(), b);
          if (!err.empty() && failures++ < 10) ADD_FAILURE() << algo.label() << ": " << c.label() << ": " << err;
        }
      },
      cfg, node_ids);
}

}  // namespace weft::test
