// weft-test-determinism: one rank of a real job that checks deterministic mode (issue 47;
// docs/DETERMINISM.md). Started by test_determinism.cc.
//
//   calls     all-reduce, reduce-scatter and reduce of float32, float64, float16 and bfloat16,
//             sum and avg, three sizes, in place and out of place; before each call a rank
//             picked at random sleeps up to 2 ms. Prints "HASH <case> <hash of the result>" for
//             the job to compare across runs; in deterministic mode (WEFT_DETERMINISTIC=1)
//             also checks every result bit for bit against the rank-order fold of every rank's
//             data, computed here with the library's kernels (each element's data depends on
//             (rank, element) only, so this also checks sizes against each other).
//   shards V  weftAllReduceShards over V virtual shards (V / ranks of them here): prints the
//             hash of each type x op's result, for the job to compare across rank counts, or
//             "REFUSED <message>" when the rank count cannot hold V shards.
// Last line "rank R: OK"; exit status 0 only when every check held.
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <weft/weft.h>

#include "collectives/datatype.h"
#include "collectives/reduce_kernels.h"

namespace {

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Element i of contribution `who` (a rank, or a shard): a value of magnitude 2^-8..2^8 whose
// rounding depends on the order of a sum.
double value(int who, uint64_t i) {
  const uint64_t h = mix(mix(static_cast<uint64_t>(who) * 1000003u + 17) ^ i);
  const double unit = static_cast<double>(h >> 11) / static_cast<double>(1ull << 53) - 0.5;
  return unit * static_cast<double>(1u << ((h >> 3) % 16)) / 128.0;
}

void fill(weftDataType_t t, void* buf, int who, uint64_t first, uint64_t n) {
  for (uint64_t k = 0; k < n; ++k) {
    const double v = value(who, first + k);
    switch (t) {
      case weftFloat32: static_cast<float*>(buf)[k] = static_cast<float>(v); break;
      case weftFloat64: static_cast<double*>(buf)[k] = v; break;
      case weftFloat16: static_cast<uint16_t*>(buf)[k] = weft::float_to_half(static_cast<float>(v)); break;
      default: static_cast<uint16_t*>(buf)[k] = weft::float_to_bf16(static_cast<float>(v)); break;
    }
  }
}

uint64_t hash(const void* p, size_t bytes) {  // FNV-1a
  uint64_t h = 1469598103934665603ull;
  for (size_t k = 0; k < bytes; ++k) h = (h ^ static_cast<const unsigned char*>(p)[k]) * 1099511628211ull;
  return h;
}

// The rank-order fold of elements [first, first + n) over `ranks` ranks' data: the canonical order.
std::vector<char> fold(weftDataType_t t, weftRedOp_t op, int ranks, uint64_t first, uint64_t n) {
  const auto dt = static_cast<weft::DataType>(t);
  const size_t es = weft::dtype_size(dt);
  std::vector<char> out(n * es), x(n * es);
  fill(t, out.data(), 0, first, n);
  for (int p = 1; p < ranks; ++p) {
    fill(t, x.data(), p, first, n);
    weft::reduce_inplace(dt, static_cast<weft::RedOp>(op), out.data(), x.data(), n);
  }
  if (op == weftAvg) weft::finish_avg(dt, out.data(), n, ranks);
  return out;
}

const char* type_name(weftDataType_t t) {
  return t == weftFloat32 ? "f32" : t == weftFloat64 ? "f64" : t == weftFloat16 ? "f16" : "bf16";
}

struct Job {
  weftComm_t comm = nullptr;
  int rank = 0, size = 1;
  bool deterministic = false;
  int failures = 0;
  std::mt19937 rng{std::random_device{}()};

  void check(weftResult_t r, const char* what) {
    if (r != weftSuccess) {
      std::printf("rank %d: FAILED %s: %s\n", rank, what, weftCommGetLastError(comm));
      ++failures;
    }
  }
  // A rank picked at random (the same pick everywhere is not needed: each rank draws) sleeps.
  void jitter() {
    if (static_cast<int>(rng() % static_cast<unsigned>(size)) == rank)
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
  }
};

void one_case(Job& j, const char* kind, weftDataType_t t, weftRedOp_t op, uint64_t count, bool in_place) {
  const size_t es = weft::dtype_size(static_cast<weft::DataType>(t));
  const int n = j.size, r = j.rank;
  const bool rs = kind[0] == 's', reduce = kind[0] == 'r';
  const uint64_t in = rs ? count * n : count;  // reduce-scatter: count is each rank's block
  std::vector<char> send(in * es), recv(in * es, 0);
  fill(t, send.data(), r, 0, in);
  const char* sp = send.data();
  char* rp = recv.data();
  if (in_place) {
    recv = send;
    sp = recv.data();
    rp = recv.data() + (rs ? r * count * es : 0);
  }
  j.jitter();
  if (rs) j.check(weftReduceScatter(sp, rp, count, t, op, j.comm), kind);
  else if (reduce) j.check(weftReduce(sp, rp, count, t, op, 0, j.comm), kind);
  else j.check(weftAllReduce(sp, rp, count, t, op, j.comm), kind);
  if (reduce && r != 0) return;
  const std::string name = std::string(kind) + "/" + type_name(t) + "/" + (op == weftAvg ? "avg" : "sum") + "/" +
                           std::to_string(count) + (in_place ? "/in" : "/out");
  std::printf("HASH %s %016" PRIx64 "\n", name.c_str(), hash(rp, count * es));
  if (!j.deterministic) return;
  const std::vector<char> want = fold(t, op, n, rs ? r * count : 0, count);
  for (uint64_t k = 0; k < count; ++k)
    if (std::memcmp(rp + k * es, want.data() + k * es, es) != 0) {
      std::printf("rank %d: WRONG %s: element %" PRIu64 " is not the rank-order fold\n", r, name.c_str(), k);
      ++j.failures;
      return;
    }
}

void calls(Job& j) {
  // 3 elements (the direct path's flag line), 3000 (its slots), 150001 (past every one-round
  // limit: the schedules, or the direct path's pieces where ranks outnumber cores).
  for (const char* kind : {"allreduce", "scatter", "reduce"})
    for (weftDataType_t t : {weftFloat32, weftFloat64, weftFloat16, weftBfloat16})
      for (weftRedOp_t op : {weftSum, weftAvg})
        for (uint64_t count : {3ull, 3000ull, 150001ull})
          for (bool in_place : {false, true}) one_case(j, kind, t, op, count, in_place);
}

void shards(Job& j, int v) {
  const int mine = v % j.size == 0 ? v / j.size : 1;
  const uint64_t count = 40001;  // not a multiple of 2 or 4: the padded blocks
  for (weftDataType_t t : {weftFloat32, weftFloat64, weftFloat16, weftBfloat16})
    for (weftRedOp_t op : {weftSum, weftAvg}) {
      const size_t es = weft::dtype_size(static_cast<weft::DataType>(t));
      std::vector<char> send(mine * count * es), recv(count * es);
      for (int s = 0; s < mine; ++s) fill(t, send.data() + s * count * es, j.rank * mine + s, 0, count);
      j.jitter();
      const weftResult_t res = weftAllReduceShards(send.data(), recv.data(), count, v, t, op, j.comm);
      if (res == weftInvalidArgument) {
        std::printf("rank %d: REFUSED %s\n", j.rank, weftCommGetLastError(j.comm));
        return;
      }
      j.check(res, "weftAllReduceShards");
      std::printf("HASH shards%d/%s/%s %016" PRIx64 "\n", v, type_name(t), op == weftAvg ? "avg" : "sum",
                  hash(recv.data(), recv.size()));
    }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string mode = argc > 1 ? argv[1] : "";
  Job j;
  if (weftCommInitFromEnv(&j.comm) != weftSuccess) {
    std::printf("init failed: %s\n", weftGetLastErrorMessage());
    return 1;
  }
  weftCommRank(j.comm, &j.rank);
  weftCommCount(j.comm, &j.size);
  int det = 0;
  weftCommGetDeterministic(j.comm, &det);
  j.deterministic = det == 1;
  if (mode == "calls") calls(j);
  else if (mode == "shards" && argc > 2) shards(j, std::atoi(argv[2]));
  else {
    std::printf("usage: weft-test-determinism calls | shards V\n");
    ++j.failures;
  }
  weftCommDestroy(j.comm);
  if (j.failures == 0) std::printf("rank %d: OK\n", j.rank);
  return j.failures == 0 ? 0 : 1;
}
