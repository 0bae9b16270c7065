// weft-test-wire: one rank of a real multi-process job that checks the numerics of 16-bit sums
// (issue 46): float16 / bfloat16 all-reduces summed in float32 in rank order and rounded once, on
// the latency path (small) and the f32acc schedule (large), and float32 all-reduces with
// WEFT_WIRE_DTYPE set (argv[1] = the wire type, or "none"): past the latency path every rank holds
// the 16-bit rounding of the float32 sum of the 16-bit roundings of the inputs, and the call ran
// the f32acc algorithm; on the latency path (no wire: one node's shared memory) the exact float32
// sum in rank order. Every rank computes every rank's inputs (seeded by rank) and so the
// expected bits. Prints "rank R: WRONG ..." per failure, then "rank R: OK <calls> calls".
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <weft/weft.h>

#include "collectives/convert_kernels.h"

namespace {

using weft::DataType;

struct Rank {
  weftComm_t comm;
  int rank, n;
  int calls = 0, failures = 0;
};

// Rank r's inputs: values of mixed sign and magnitude, so that sums round.
std::vector<float> inputs(int r, uint64_t count) {
  std::mt19937 g(static_cast<unsigned>(1000 + r * 7919 + count));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(count);
  for (float& v : x) v = u(g) * (1.0f + 100.0f * std::fabs(u(g)));
  return x;
}

std::vector<uint16_t> to16(DataType t, const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  weft::narrow_from_f32(t, out.data(), x.data(), x.size());
  return out;
}

// The float32 sum in rank order of the 16-bit (or float32) inputs, then the average's division.
std::vector<float> rank_order_sum(const Rank& R, uint64_t count, DataType t16, bool round_inputs) {
  std::vector<float> acc(count, 0.0f), w(count);
  for (int r = 0; r < R.n; ++r) {
    std::vector<float> x = inputs(r, count);
    if (round_inputs) weft::widen_to_f32(t16, w.data(), to16(t16, x).data(), count);
    else w = x;
    if (r == 0) acc = w;
    else weft::add_f32(acc.data(), w.data(), count);
  }
  return acc;
}

void expect(Rank& R, bool ok, const std::string& what) {
  if (ok) return;
  std::printf("rank %d: WRONG %s\n", R.rank, what.c_str());
  ++R.failures;
}

// float16 / bfloat16 sum and average: exactly the rounding of the float32 rank-order sum.
void half_sums(Rank& R) {
  for (DataType t : {DataType::kBfloat16, DataType::kFloat16})
    for (weftRedOp_t op : {weftSum, weftAvg})
      for (uint64_t count : {uint64_t{1001}, uint64_t{300007}})
        for (bool in_place : {false, true}) {
          std::vector<uint16_t> in = to16(t, inputs(R.rank, count)), out(count);
          void* recv = in_place ? static_cast<void*>(in.data()) : out.data();
          const weftResult_t res = weftAllReduce(in.data(), recv, count, static_cast<weftDataType_t>(t), op, R.comm);
          ++R.calls;
          const std::vector<float> acc = rank_order_sum(R, count, t, true);
          std::vector<uint16_t> want(count);
          weft::narrow_from_f32(t, want.data(), acc.data(), count, op == weftAvg ? R.n : 1);
          const auto* got = static_cast<const uint16_t*>(recv);
          uint64_t bad = 0;
          for (uint64_t i = 0; i < count; ++i) bad += got[i] != want[i];
          const char* algo = "";
          weftCommLastAlgorithm(R.comm, &algo);
          expect(R, res == weftSuccess && bad == 0,
                 std::string(t == DataType::kBfloat16 ? "bfloat16" : "float16") + (op == weftAvg ? " avg" : " sum") +
                     " count " + std::to_string(count) + (in_place ? " in place" : "") + " (algorithm " + algo + "): " +
                     std::to_string(bad) + " elements differ from the float32 sum rounded once");
        }
}

// float32 sums with the wire type (or none): what each path promises.
void wire_sums(Rank& R, const std::string& wire) {
  const bool on = wire != "none";
  const DataType t16 = wire == "float16" ? DataType::kFloat16 : DataType::kBfloat16;
  for (weftRedOp_t op : {weftSum, weftAvg})
    for (uint64_t count : {uint64_t{1001}, uint64_t{300007}})
      for (bool in_place : {false, true}) {
        std::vector<float> in = inputs(R.rank, count), out(count);
        float* recv = in_place ? in.data() : out.data();
        const weftResult_t res = weftAllReduce(in.data(), recv, count, weftFloat32, op, R.comm);
        ++R.calls;
        const char* algo = "";
        weftCommLastAlgorithm(R.comm, &algo);
        const bool wide = std::string(algo) == "f32acc";
        std::vector<float> want = rank_order_sum(R, count, t16, wide);
        if (wide) {
          std::vector<uint16_t> r16(count);
          weft::narrow_from_f32(t16, r16.data(), want.data(), count, op == weftAvg ? R.n : 1);
          weft::widen_to_f32(t16, want.data(), r16.data(), count);
        }
        uint64_t bad = 0;
        for (uint64_t i = 0; i < count; ++i) {
          float w = want[i];
          if (!wide && op == weftAvg) w /= static_cast<float>(R.n);
          // Off the wire type the path's own float32 order may differ (a ring): within 1e-5.
          bad += wide ? std::memcmp(&recv[i], &w, 4) != 0 : std::fabs(recv[i] - w) > 1e-5f * (1.0f + std::fabs(w));
        }
        const bool large = count > 100000;
        expect(R, res == weftSuccess && bad == 0 && wide == (on && large),
               std::string("float32 ") + (op == weftAvg ? "avg" : "sum") + " count " + std::to_string(count) +
                   (in_place ? " in place" : "") + " with wire " + wire + ": algorithm " + algo + ", " +
                   std::to_string(bad) + " elements off");
      }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string wire = argc > 1 ? argv[1] : "none";
  weftComm_t comm = nullptr;
  if (weftCommInitFromEnv(&comm) != weftSuccess) {
    std::printf("rank ?: FATAL %s\n", weftGetLastErrorMessage());
    return 2;
  }
  Rank R{comm, 0, 0};
  weftCommRank(comm, &R.rank);
  weftCommCount(comm, &R.n);
  half_sums(R);
  wire_sums(R, wire);
  if (weftBarrier(comm) != weftSuccess) ++R.failures;
  weftCommDestroy(comm);
  if (R.failures == 0) std::printf("rank %d: OK %d calls\n", R.rank, R.calls);
  return R.failures == 0 ? 0 : 1;
}
