// weft-test-stress: one rank of a real multi-process job that runs long runs of consecutive
// collectives with every algorithm forced (weftCommSetAlgorithm), at sizes across the slice and
// staging boundaries, with random delays between calls (each rank its own), in place and out of
// place, and checks every element (and the guard bytes around the buffers) against the
// independent reference of tests/collectives/collective_check.h. Started by test_stress.cc.
//
// The delays are what matter: a rank that leaves a call early posts the next call's messages
// while its peers are still in the previous one (issue 44: the tree all-reduce over shared memory
// deadlocked in about one run in four this way).
//
// Modes (argv[1]):
//   stress [CALLS]   every all-reduce algorithm, CALLS (default 50) consecutive calls each (the
//                    tree CALLS/5 more of the repro case), then CALLS/5 calls of every other
//                    collective's forced algorithms
//   repro [CALLS]    the case: the tree all-reduce, in place, 4-8 MiB of float32 and
//                    float64, CALLS (default 6) calls with up to 3 ms between them
// Environment: WEFT_TEST_SEED (the call sequence, the same on every rank; default 1),
// WEFT_TEST_ALGOS (a comma list instead of every all-reduce algorithm).
// Each failure prints "rank R: WRONG <case>: <what>"; the last line is "rank R: OK <calls> calls".
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <weft/weft.h>

#include "collectives/collective_check.h"

namespace {

using weft::CollectiveKind;
using weft::DataType;
using weft::RedOp;
using weft::test::CollCase;

weftResult_t call(weftComm_t comm, const CollCase& c, const void* s, void* r) {
  const auto t = static_cast<weftDataType_t>(c.dt);
  const auto op = static_cast<weftRedOp_t>(c.op);
  switch (c.kind) {
    case CollectiveKind::kAllReduce: return weftAllReduce(s, r, c.count, t, op, comm);
    case CollectiveKind::kReduce: return weftReduce(s, r, c.count, t, op, c.root, comm);
    case CollectiveKind::kReduceScatter: return weftReduceScatter(s, r, c.count, t, op, comm);
    case CollectiveKind::kAllGather: return weftAllGather(s, r, c.count, t, comm);
    case CollectiveKind::kBroadcast: return weftBroadcast(s, r, c.count, t, c.root, comm);
    case CollectiveKind::kAllToAll: return weftAllToAll(s, r, c.count, t, comm);
    default: return weftInvalidArgument;
  }
}

struct Runner {
  weftComm_t comm;
  int rank = 0, n = 0;
  int calls = 0, failures = 0;
  std::mt19937_64 delay_rng;  // this rank's own: the ranks enter each call at different times
  int max_delay_us = 3000;
  double call_s = 0, check_s = 0;  // where the time went (printed at the end)

  // Sleeps 0..max_delay_us (a third of the calls not at all), runs the case on every rank and
  // checks this rank's buffers. False when the call failed (the communicator may be broken).
  bool run(const CollCase& c, const std::string& algo) {
    auto t0 = std::chrono::steady_clock::now();
    weft::test::RankBuffers b = weft::test::make_buffers(c, rank);
    check_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const uint64_t d = delay_rng() % (3 * static_cast<uint64_t>(max_delay_us) / 2 + 1);
    if (d < static_cast<uint64_t>(max_delay_us)) std::this_thread::sleep_for(std::chrono::microseconds(d));
    ++calls;
    t0 = std::chrono::steady_clock::now();
    const weftResult_t res = call(comm, c, b.send, b.recv);
    call_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (res != weftSuccess) {
      std::printf("rank %d: WRONG %s [%s] (call %d): error %d %s\n", rank, c.label().c_str(), algo.c_str(), calls,
                  static_cast<int>(res), weftCommGetLastError(comm));
      ++failures;
      return false;
    }
    t0 = std::chrono::steady_clock::now();
    const std::string err = weft::test::check_buffers(c, rank, b);
    check_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!err.empty() && ++failures <= 20)
      std::printf("rank %d: WRONG %s [%s] (call %d): %s\n", rank, c.label().c_str(), algo.c_str(), calls, err.c_str());
    return true;
  }
};

CollCase make(CollectiveKind k, DataType t, RedOp op, uint64_t count, int n, int root, bool in_place) {
  CollCase c;
  c.kind = k;
  c.dt = t;
  c.op = op;
  c.count = count;
  c.n = n;
  c.root = root;
  c.in_place = in_place;
  return c;
}

// A byte size for call i of a run of `calls`: the boundaries of the data path (descriptor-inline
// 4 KiB, a tree slice 128 KiB, the default slice 512 KiB, the staging chunk 1 MiB; just below,
// at and past each, and primes), else log-uniform from 1 B to 8 MiB; the largest (> 2 MiB) at
// most one call in four so that a run stays short.
uint64_t pick_bytes(std::mt19937_64& g) {
  static const uint64_t kEdges[] = {1,          3,          4093,       4096 - 64,   4097,       131071,
                                    131072,     131101,     524287,     524288,      524309,     1048573,
                                    1048576,    1048583,    2097143,    4194301,     8388593,    8388608};
  if (g() % 3 == 0) return kEdges[g() % (sizeof kEdges / sizeof kEdges[0])];
  uint64_t b = static_cast<uint64_t>(std::exp2(static_cast<double>(g() % 23000) / 1000.0));
  if (b > (2u << 20) && g() % 2) b >>= 3;
  return std::max<uint64_t>(b, 1);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool set_algo(Runner& R, const std::string& algo) {
  if (weftCommSetAlgorithm(R.comm, algo.c_str()) == weftSuccess) return true;
  std::printf("rank %d: WRONG weftCommSetAlgorithm(%s): %s\n", R.rank, algo.c_str(), weftCommGetLastError(R.comm));
  ++R.failures;
  return false;
}

bool repro(Runner& R, int calls, std::mt19937_64& g);

bool stress(Runner& R, int calls, std::mt19937_64& g) {
  const char* only = std::getenv("WEFT_TEST_ALGOS");
  const std::vector<std::string> algos = split(only ? only : "ring,tree,rhd,hier,forest,f32acc");
  constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kBfloat16,
                                 DataType::kInt8};
  for (const std::string& algo : algos) {
    if (!set_algo(R, algo)) return false;
    for (int i = 0; i < calls; ++i) {
      // Mostly float32/float64 sums (the case); now and then another type or op.
      const DataType t = g() % 4 ? kTypes[g() % 2] : kTypes[g() % 5];
      const RedOp op = g() % 4 ? RedOp::kSum : static_cast<RedOp>(g() % weft::kNumRedOps);
      const uint64_t es = weft::dtype_size(t);
      const uint64_t count = std::max<uint64_t>(pick_bytes(g) / es, 1) + (g() % 2);  // odd counts too
      if (!R.run(make(CollectiveKind::kAllReduce, t, op, count, R.n, 0, g() % 3 != 0), algo)) return false;
    }
    // Issue 44's case on top: a run of in-place 4-8 MiB calls (many slices per tree, so the
    // executor often starts a leaf's up-slices out of order), a fifth of the calls.
    if (algo == "tree" && !repro(R, calls / 5, g)) return false;
  }
  // The other collectives' forced algorithms, a few calls each (cheap: the moving ones carry no
  // reduction, and every size is at most 2 MiB in all).
  struct Other {
    CollectiveKind kind;
    const char* algo;
  };
  const Other others[] = {{CollectiveKind::kReduceScatter, "ring"}, {CollectiveKind::kReduceScatter, "hier"},
                          {CollectiveKind::kReduceScatter, "forest"}, {CollectiveKind::kAllGather, "ring"},
                          {CollectiveKind::kAllGather, "hier"},       {CollectiveKind::kAllGather, "forest"},
                          {CollectiveKind::kBroadcast, "chain"},      {CollectiveKind::kBroadcast, "binomial"},
                          {CollectiveKind::kReduce, "chain"},         {CollectiveKind::kReduce, "binomial"},
                          {CollectiveKind::kAllToAll, "pairwise"}};
  const int other_calls = std::max(1, calls / 5);
  for (const Other& o : others) {
    if (!set_algo(R, o.algo)) return false;
    const bool per_rank = o.kind == CollectiveKind::kReduceScatter || o.kind == CollectiveKind::kAllGather ||
                          o.kind == CollectiveKind::kAllToAll;
    for (int i = 0; i < other_calls; ++i) {
      const DataType t = g() % 2 ? DataType::kFloat32 : DataType::kInt32;
      uint64_t bytes = pick_bytes(g);
      if (bytes > (2u << 20)) bytes >>= 2;
      if (per_rank) bytes /= static_cast<uint64_t>(R.n);
      const uint64_t count = std::max<uint64_t>(bytes / 4, 1) + (g() % 2);
      const int root = static_cast<int>(g() % static_cast<uint64_t>(R.n));
      if (!R.run(make(o.kind, t, RedOp::kSum, count, R.n, root, g() % 2 != 0), o.algo)) return false;
    }
  }
  return true;
}

// Issue 44's case: consecutive in-place tree all-reduces of 4-8 MiB with up to 3 ms between calls.
bool repro(Runner& R, int calls, std::mt19937_64& g) {
  if (!set_algo(R, "tree")) return false;
  for (int i = 0; i < calls; ++i) {
    const DataType t = i % 2 ? DataType::kFloat64 : DataType::kFloat32;
    const uint64_t bytes = (4u << 20) + g() % (4u << 20);
    if (!R.run(make(CollectiveKind::kAllReduce, t, RedOp::kSum, bytes / weft::dtype_size(t), R.n, 0, true), "tree"))
      return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "stress";
  if (mode != "stress" && mode != "repro") {
    std::printf("usage: weft-test-stress stress|repro [CALLS]\n");
    return 2;
  }
  weftComm_t comm = nullptr;
  if (weftCommInitFromEnv(&comm) != weftSuccess) {
    std::printf("rank ?: FATAL %s\n", weftGetLastErrorMessage());
    return 2;
  }
  Runner R{comm};
  weftCommRank(comm, &R.rank);
  weftCommCount(comm, &R.n);
  const char* seed_env = std::getenv("WEFT_TEST_SEED");
  const uint64_t seed = seed_env ? std::strtoull(seed_env, nullptr, 10) : 1;
  std::mt19937_64 g(seed);  // the call sequence: the same on every rank
  R.delay_rng.seed(seed * 1000003 + static_cast<uint64_t>(R.rank) + 1);
  const int calls = argc > 2 ? std::atoi(argv[2]) : mode == "repro" ? 6 : 50;
  const auto t0 = std::chrono::steady_clock::now();
  const bool completed = mode == "repro" ? repro(R, calls, g) : stress(R, calls, g);
  if (completed && weftBarrier(comm) != weftSuccess) ++R.failures;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rank %d: %s %d calls, %d wrong, %.2f s (%.2f s in calls, %.2f s filling and checking)\n", R.rank,
              R.failures == 0 && completed ? "OK" : "FAILED", R.calls, R.failures, secs, R.call_s, R.check_s);
  std::fflush(stdout);
  if (!completed) _exit(1);  // a broken communicator: leave without teardown
  weftCommDestroy(comm);
  return R.failures == 0 ? 0 : 1;
}
