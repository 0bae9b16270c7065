// weft-test-matrix: one rank of a real multi-process job that runs every collective x every type x
// every op through the public C API, at sizes on both sides of every internal threshold, in
// place and out of place, and checks each rank's buffers (result and guard bytes) against the
// independent reference of tests/collectives/collective_check.h. Started by test_matrix.cc.
//
// Modes (argv[1]):
//   full    the whole product at sizes up to 256 KiB + a few elements (past the direct path's
//           inline limit, the descriptor-inline limit, the direct path's 32 KiB and 256 KiB
//           cuts); past 1 MiB (the staging chunk) every (type, op) pair of the reducing
//           collectives once and every type of the moving ones, rotating collective, placement
//           and root so the product is covered pairwise; then the randomized sweep and the
//           determinism check.
//   one     one case repeated, for chasing a failure (see one() below)
//   large   reducing collectives only, at messages over 1 MiB: run with WEFT_SLICE_BYTES above
//           1 MiB so a single step's message passes the staging chunk and the shared-memory
//           transport's cross-process read + reduce (bounce buffer) branch is taken.
// Every mode starts with first_large_send (below).
// Each failure prints "rank R: WRONG <case>: <what>"; the last line is "rank R: OK <calls> calls".
// Exit status 0 only when every case held on this rank.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
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

constexpr CollectiveKind kReducing[] = {CollectiveKind::kAllReduce, CollectiveKind::kReduce,
                                        CollectiveKind::kReduceScatter};
constexpr CollectiveKind kMoving[] = {CollectiveKind::kAllGather, CollectiveKind::kBroadcast,
                                      CollectiveKind::kAllToAll};

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
  int rank, n;
  int calls = 0, failures = 0;
  // WEFT_TEST_SHARED=1: every call's buffers are copied into two weftMemAlloc regions (node-shared
  // windows: the latency path and the window path read and write them directly), the call runs on
  // those, and the results are copied back for the check. Cases larger than a region run as usual.
  uint8_t* swin = nullptr;
  uint8_t* rwin = nullptr;
  static constexpr size_t kWindow = size_t{24} << 20;

  // Runs one case on every rank (all ranks build the same list) and checks this rank's buffers.
  bool run(const CollCase& c) {
    weft::test::RankBuffers b = weft::test::make_buffers(c, rank);
    ++calls;
    const bool shared = swin && b.s.size() <= kWindow && b.r.size() <= kWindow;
    const void* send = b.send;
    void* recv = b.recv;
    if (shared) {
      if (!b.s.empty()) std::memcpy(swin, b.s.data(), b.s.size());
      if (!b.r.empty()) std::memcpy(rwin, b.r.data(), b.r.size());
      auto in_r = [&](const void* p) {
        return p >= static_cast<const void*>(b.r.data()) && p < static_cast<const void*>(b.r.data() + b.r.size());
      };
      send = in_r(b.send) ? static_cast<const void*>(rwin + (static_cast<const uint8_t*>(b.send) - b.r.data()))
                          : static_cast<const void*>(swin + (static_cast<const uint8_t*>(b.send) - b.s.data()));
      recv = rwin + (static_cast<uint8_t*>(b.recv) - b.r.data());
    }
    const weftResult_t res = call(comm, c, send, recv);
    if (shared) {
      if (!b.s.empty()) std::memcpy(b.s.data(), swin, b.s.size());
      if (!b.r.empty()) std::memcpy(b.r.data(), rwin, b.r.size());
    }
    if (res != weftSuccess) {
      std::printf("rank %d: WRONG %s: error %d %s\n", rank, c.label().c_str(), static_cast<int>(res),
                  weftCommGetLastError(comm));
      ++failures;
      return false;  // the communicator may be broken: stop here rather than hang the others
    }
    const std::string err = weft::test::check_buffers(c, rank, b);
    if (!err.empty() && ++failures <= 20) std::printf("rank %d: WRONG %s: %s\n", rank, c.label().c_str(), err.c_str());
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

// Element counts of one rank's part: 0, 1, primes and counts not divisible by the rank count,
// then just past each byte threshold of the data path (for a type of es bytes).
std::vector<uint64_t> small_counts(uint64_t es) {
  return {0, 1, 2, 7, 13, 1009, 40 / es + 1, 4032 / es + 3, (32u << 10) / es + 5, (256u << 10) / es + 11};
}
std::vector<uint64_t> large_counts(uint64_t es) { return {(1u << 20) / es + 7, (3u << 20) / es + 13}; }

// The first message on a fresh pair of ranks, past the staging chunk (so read by the receiver
// straight from the sender's buffer): the send must not return before the receiver has read it.
// Rank 1 receives only after 300 ms; rank 0 overwrites its buffer as soon as the send returns.
// (A fresh segment's zeroed acknowledgement once passed for message 0's: the send returned at
// once and rank 1 read the overwritten buffer, or freed memory.)
bool first_large_send(Runner& R) {
  if (R.n < 2 || R.rank > 1) return true;
  std::vector<int32_t> buf((size_t{2} << 20) / 4 + 3);
  ++R.calls;
  if (R.rank == 0) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<int32_t>(i * 2654435761u);
    if (weftSend(buf.data(), buf.size(), weftInt32, 1, R.comm) != weftSuccess) return ++R.failures, false;
    std::fill(buf.begin(), buf.end(), -1);
    return true;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  if (weftRecv(buf.data(), buf.size(), weftInt32, 0, R.comm) != weftSuccess) return ++R.failures, false;
  for (size_t i = 0; i < buf.size(); ++i) {
    if (buf[i] != static_cast<int32_t>(i * 2654435761u)) {
      std::printf("rank 1: WRONG first 2 MiB message from rank 0: element %zu is %d: read after the send returned\n", i,
                  buf[i]);
      ++R.failures;
      return true;
    }
  }
  return true;
}

bool full(Runner& R) {
  const int n = R.n;
  int k = 0;
  for (int ti = 0; ti < weft::kNumDataTypes; ++ti) {
    const auto t = static_cast<DataType>(ti);
    for (uint64_t count : small_counts(weft::dtype_size(t))) {
      for (bool in_place : {false, true}) {
        for (CollectiveKind kind : kReducing)
          for (int o = 0; o < weft::kNumRedOps; ++o)
            if (!R.run(make(kind, t, static_cast<RedOp>(o), count, n, ++k % n, in_place))) return false;
        for (CollectiveKind kind : kMoving)
          if (!R.run(make(kind, t, RedOp::kSum, count, n, ++k % n, in_place))) return false;
      }
    }
  }
  // Past the staging chunk: each (type, op) pair once, the collective, placement and root rotating.
  for (int ti = 0; ti < weft::kNumDataTypes; ++ti) {
    const auto t = static_cast<DataType>(ti);
    const std::vector<uint64_t> counts = large_counts(weft::dtype_size(t));
    for (int o = 0; o < weft::kNumRedOps; ++o) {
      const int j = ti * weft::kNumRedOps + o;
      if (!R.run(make(kReducing[j % 3], t, static_cast<RedOp>(o), counts[j % 2], n, j % n, (j / 3) % 2))) return false;
    }
    if (!R.run(make(kMoving[ti % 3], t, RedOp::kSum, counts[ti % 2], n, (ti + 1) % n, ti % 2))) return false;
    if (!R.run(make(kMoving[(ti + 1) % 3], t, RedOp::kSum, counts[(ti + 1) % 2], n, ti % n, (ti + 1) % 2)))
      return false;
  }
  // Randomized sweep: the same seeded sequence on every rank (the seed is WEFT_TEST_SEED or 1).
  const char* seed_env = std::getenv("WEFT_TEST_SEED");
  std::mt19937_64 rng(seed_env ? std::strtoull(seed_env, nullptr, 10) : 1);
  for (int i = 0; i < 60; ++i) {
    const auto kind = static_cast<CollectiveKind>(rng() % 6);
    const auto t = static_cast<DataType>(rng() % weft::kNumDataTypes);
    const bool reducing = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduce ||
                          kind == CollectiveKind::kReduceScatter;
    const auto op = reducing ? static_cast<RedOp>(rng() % weft::kNumRedOps) : RedOp::kSum;
    const uint64_t count = rng() % 4 == 0 ? rng() % 70000 : rng() % 300;
    const int root = static_cast<int>(rng() % static_cast<uint64_t>(n));
    const bool in_place = rng() % 2;
    if (!R.run(make(kind, t, op, count, n, root, in_place))) return false;
  }
  // Determinism: float sums of values that round (so the order of the additions shows) give the
  // same bits on every rank and on every repetition.
  for (uint64_t count : {uint64_t{3}, uint64_t{4099}, uint64_t{300001}}) {
    std::vector<float> in(count), out(count), again(count);
    std::mt19937 g(static_cast<unsigned>(R.rank * 7919 + count));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& x : in) x = u(g) * 1e-3f + u(g);
    weftAllReduce(in.data(), out.data(), count, weftFloat32, weftSum, R.comm);
    weftAllReduce(in.data(), again.data(), count, weftFloat32, weftSum, R.comm);
    R.calls += 2;
    uint64_t h = 1469598103934665603ull;
    for (float x : out) {
      uint32_t bits;
      std::memcpy(&bits, &x, 4);
      h = (h ^ bits) * 1099511628211ull;
    }
    std::vector<uint64_t> all(static_cast<size_t>(n));
    weftAllGather(&h, all.data(), 1, weftInt64, R.comm);
    ++R.calls;
    const bool same_ranks = std::all_of(all.begin(), all.end(), [&](uint64_t x) { return x == all[0]; });
    if (out != again || !same_ranks) {
      std::printf("rank %d: WRONG determinism at count %llu: %s\n", R.rank, static_cast<unsigned long long>(count),
                  out != again ? "a repetition gave other bits" : "ranks hold different bits");
      ++R.failures;
    }
  }
  return true;
}

// Reducing collectives with messages past the staging chunk (WEFT_SLICE_BYTES > 1 MiB): every
// (type, op) pair of all-reduce, reduce and reduce-scatter, placement and root rotating.
bool large(Runner& R) {
  int j = 0;
  for (int ti = 0; ti < weft::kNumDataTypes; ++ti) {
    const auto t = static_cast<DataType>(ti);
    const uint64_t count = (uint64_t{3} << 20) / weft::dtype_size(t) + 5;  // > 1 MiB a rank even for n = 2
    for (int o = 0; o < weft::kNumRedOps; ++o)
      for (CollectiveKind kind : kReducing) {
        ++j;
        // reduce-scatter's count is per rank: keep each rank's part past the chunk too
        const uint64_t c = kind == CollectiveKind::kReduceScatter ? (uint64_t{1} << 20) / weft::dtype_size(t) + 3 : count;
        if (!R.run(make(kind, t, static_cast<RedOp>(o), c, R.n, j % R.n, j % 2))) return false;
      }
  }
  return true;
}

// One case, repeated (for chasing a failure): argv = one <kind 0-5> <type 0-7> <op 0-4> <count> <root> <in_place> <reps>.
bool one(Runner& R, char** argv) {
  const CollCase c = make(static_cast<CollectiveKind>(std::atoi(argv[2])), static_cast<DataType>(std::atoi(argv[3])),
                          static_cast<RedOp>(std::atoi(argv[4])), std::strtoull(argv[5], nullptr, 10), R.n,
                          std::atoi(argv[6]), std::atoi(argv[7]) != 0);
  for (int i = 0, reps = std::atoi(argv[8]); i < reps; ++i)
    if (!R.run(c)) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "full";
  weftComm_t comm = nullptr;
  if (weftCommInitFromEnv(&comm) != weftSuccess) {
    std::printf("rank ?: FATAL %s\n", weftGetLastErrorMessage());
    return 2;
  }
  Runner R{comm, 0, 0};
  weftCommRank(comm, &R.rank);
  weftCommCount(comm, &R.n);
  const char* shared = std::getenv("WEFT_TEST_SHARED");
  if (shared && *shared == '1') {
    void* a = nullptr;
    void* b = nullptr;
    if (weftMemAlloc(comm, Runner::kWindow, &a) != weftSuccess || weftMemAlloc(comm, Runner::kWindow, &b) != weftSuccess) {
      std::printf("rank %d: FATAL weftMemAlloc: %s\n", R.rank, weftCommGetLastError(comm));
      return 2;
    }
    R.swin = static_cast<uint8_t*>(a);
    R.rwin = static_cast<uint8_t*>(b);
  }
  if (mode == "one" && argc < 9) {
    std::printf("usage: weft-test-matrix one <kind> <type> <op> <count> <root> <in_place> <reps>\n");
    return 2;
  }
  const bool completed =
      first_large_send(R) && (mode == "large" ? large(R) : mode == "one" ? one(R, argv) : full(R));
  if (completed && weftBarrier(comm) != weftSuccess) ++R.failures;
  std::printf("rank %d: %s %d calls, %d wrong\n", R.rank, R.failures == 0 && completed ? "OK" : "FAILED", R.calls,
              R.failures);
  std::fflush(stdout);
  if (!completed) _exit(1);  // a broken communicator: leave without teardown
  if (R.swin) {
    weftMemFree(comm, R.swin);
    weftMemFree(comm, R.rwin);
  }
  weftCommDestroy(comm);
  return R.failures == 0 ? 0 : 1;
}
