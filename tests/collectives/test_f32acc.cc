// The f32acc all-reduce (collectives/algorithms/f32acc_allreduce.cc) as schedules in the
// simulator (schedule_sim.h: random interleavings, hazards, scratch guards): float16 / bfloat16
// sums and averages equal the float32 rank-order sum rounded once, bit for bit, in place or not,
// at any rank count, size and slicing; float32 with a wire type equals the rounding of the float32
// sum of the rounded inputs on every rank; and the ring, which rounds at every hop, is measurably
// further from the exact sum (the reason for the algorithm).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "collectives/algorithms/builtin.h"
#include "collectives/collective.h"
#include "collectives/convert_kernels.h"
#include "schedule_sim.h"

using namespace weft;
using namespace weft::test;

namespace {

std::vector<float> values(int r, uint64_t count) {
  std::mt19937 g(static_cast<unsigned>(17 + 131 * r + count));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(count);
  for (float& v : x) v = u(g) * (1.0f + 50.0f * std::fabs(u(g)));
  return x;
}

std::vector<uint16_t> round16(DataType t, const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  narrow_from_f32(t, out.data(), x.data(), x.size());
  return out;
}

std::vector<float> widen(DataType t, const std::vector<uint16_t>& x) {
  std::vector<float> out(x.size());
  widen_to_f32(t, out.data(), x.data(), x.size());
  return out;
}

// Runs `algo` over n ranks whose inputs are `in` (bytes per rank); returns every rank's output.
std::vector<std::vector<uint8_t>> run(const char* algo, const CollectiveArgs& a, int n, const AlgoOptions& opt,
                                      std::vector<std::vector<uint8_t>> in, uint64_t seed) {
  const uint64_t bytes = a.count * dtype_size(a.dtype);
  std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(bytes));
  std::vector<Schedule> s;
  std::vector<SimRank> sim;
  for (int r = 0; r < n; ++r) {
    s.push_back(build_schedule(*find_algorithm(algo, CollectiveKind::kAllReduce), a, r, n, opt));
    sim.push_back({in[r].data(), a.in_place ? in[r].data() : out[r].data()});
  }
  EXPECT_EQ(simulate(s, sim, seed), "") << algo << " " << n << " ranks, count " << a.count;
  return a.in_place ? in : out;
}

}  // namespace

TEST(F32Acc, SixteenBitSumsAreTheFloat32SumRoundedOnce) {
  int cases = 0;
  for (DataType t : {DataType::kBfloat16, DataType::kFloat16})
    for (RedOp op : {RedOp::kSum, RedOp::kAvg})
      for (int n : {1, 2, 3, 5, 8})
        for (uint64_t count : {1ull, 7ull, 1009ull, 6000ull})
          for (bool in_place : {false, true})
            for (uint64_t slice : {256ull, 512ull * 1024}) {
              CollectiveArgs a{CollectiveKind::kAllReduce, count, t, op, 0, in_place};
              AlgoOptions opt;
              opt.slice_bytes = slice;
              std::vector<std::vector<uint8_t>> in(n);
              std::vector<float> acc;
              for (int r = 0; r < n; ++r) {
                std::vector<uint16_t> x = round16(t, values(r, count));
                in[r].resize(2 * count);
                std::memcpy(in[r].data(), x.data(), 2 * count);
                std::vector<float> w = widen(t, x);
                if (r == 0) acc = w;
                else add_f32(acc.data(), w.data(), count);
              }
              std::vector<uint16_t> want(count);
              narrow_from_f32(t, want.data(), acc.data(), count, op == RedOp::kAvg ? n : 1);
              auto out = run("f32acc", a, n, opt, in, ++cases);
              for (int r = 0; r < n; ++r)
                ASSERT_EQ(std::memcmp(out[r].data(), want.data(), 2 * count), 0)
                    << dtype_name(t) << " " << redop_name(op) << " rank " << r << " of " << n << ", count " << count
                    << (in_place ? " in place" : "") << " slice " << slice;
            }
}

TEST(F32Acc, Float32WithAWireTypeIsTheSameOnEveryRank) {
  for (DataType wire : {DataType::kBfloat16, DataType::kFloat16})
    for (RedOp op : {RedOp::kSum, RedOp::kAvg})
      for (int n : {2, 3, 4})
        for (bool in_place : {false, true}) {
          const uint64_t count = 3001;
          CollectiveArgs a{CollectiveKind::kAllReduce, count, DataType::kFloat32, op, 0, in_place};
          AlgoOptions opt;
          opt.slice_bytes = 1024;
          opt.wire = wire;
          std::vector<std::vector<uint8_t>> in(n);
          std::vector<float> acc;
          for (int r = 0; r < n; ++r) {
            std::vector<float> x = values(r, count);
            in[r].resize(4 * count);
            std::memcpy(in[r].data(), x.data(), 4 * count);
            std::vector<float> w = widen(wire, round16(wire, x));
            if (r == 0) acc = w;
            else add_f32(acc.data(), w.data(), count);
          }
          std::vector<uint16_t> r16(count);
          narrow_from_f32(wire, r16.data(), acc.data(), count, op == RedOp::kAvg ? n : 1);
          const std::vector<float> want = widen(wire, r16);
          auto out = run("f32acc", a, n, opt, in, 7);
          for (int r = 0; r < n; ++r)
            ASSERT_EQ(std::memcmp(out[r].data(), want.data(), 4 * count), 0)
                << dtype_name(wire) << " wire, " << redop_name(op) << " rank " << r << " of " << n;
        }
}

// Without a wire type, and for other types and ops, the same exchange reduces in the call's type.
TEST(F32Acc, OtherTypesReduceInTheirOwnType) {
  for (int n : {2, 3, 5}) {
    const uint64_t count = 777;
    CollectiveArgs a{CollectiveKind::kAllReduce, count, DataType::kInt32, RedOp::kSum, 0, false};
    std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(4 * count));
    std::vector<int32_t> want(count, 0);
    for (int r = 0; r < n; ++r)
      for (uint64_t i = 0; i < count; ++i) {
        const int32_t v = static_cast<int32_t>(r * 1000 + i);
        std::memcpy(in[r].data() + 4 * i, &v, 4);
        want[i] += v;
      }
    auto out = run("f32acc", a, n, AlgoOptions{}, in, 3);
    for (int r = 0; r < n; ++r) ASSERT_EQ(std::memcmp(out[r].data(), want.data(), 4 * count), 0) << n << " ranks";
  }
}

// bfloat16 at 8 ranks: the ring's n - 1 roundings put it further from the exact sum than one
// rounding (root mean square of the error over 4096 sums).
TEST(F32Acc, TheRingRoundsAtEveryHopAndIsFurtherFromTheExactSum) {
  const int n = 8;
  const uint64_t count = 4096;
  const DataType t = DataType::kBfloat16;
  CollectiveArgs a{CollectiveKind::kAllReduce, count, t, RedOp::kSum, 0, false};
  std::vector<std::vector<uint8_t>> in(n);
  std::vector<double> exact(count, 0.0);
  for (int r = 0; r < n; ++r) {
    std::vector<uint16_t> x = round16(t, values(r, count));
    in[r].resize(2 * count);
    std::memcpy(in[r].data(), x.data(), 2 * count);
    std::vector<float> w = widen(t, x);
    for (uint64_t i = 0; i < count; ++i) exact[i] += w[i];
  }
  auto rms = [&](const std::vector<uint8_t>& out) {
    std::vector<uint16_t> x(count);
    std::memcpy(x.data(), out.data(), 2 * count);
    std::vector<float> w = widen(t, x);
    double e = 0;
    for (uint64_t i = 0; i < count; ++i) e += (w[i] - exact[i]) * (w[i] - exact[i]);
    return std::sqrt(e / count);
  };
  const double once = rms(run("f32acc", a, n, AlgoOptions{}, in, 1)[0]);
  const double ring = rms(run("ring", a, n, AlgoOptions{}, in, 1)[0]);
  std::printf("[ figure ] bfloat16, 8 ranks: rms error against the exact sum %.4g rounded once, %.4g along the ring\n", once,
              ring);
  EXPECT_LT(once * 1.5, ring) << "rms error: rounded once " << once << ", ring " << ring;
}

// The conversion kernels (F16C for float16 where the CPU has it, 8 at a time, the software
// conversions for the rest) give the bits of the scalar conversions of reduce_kernels.h: every
// 16-bit value widened, and floats of every magnitude narrowed, with and without a division.
TEST(ConvertKernels, AgreeWithTheScalarConversions) {
  for (DataType t : {DataType::kFloat16, DataType::kBfloat16}) {
    auto to_f = [&](uint16_t h) { return t == DataType::kFloat16 ? half_to_float(h) : bf16_to_float(h); };
    auto to_h = [&](float f) { return t == DataType::kFloat16 ? float_to_half(f) : float_to_bf16(f); };
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<float> wide(all.size()), sum(all.size(), 1.5f);
    widen_to_f32(t, wide.data(), all.data(), all.size());
    widen_add_f32(t, sum.data(), all.data(), all.size());
    for (uint32_t i = 0; i < 65536; ++i) {
      const float w = to_f(all[i]), s = 1.5f + w;
      ASSERT_EQ(std::memcmp(&wide[i], &w, 4), 0) << dtype_name(t) << " widen " << i;
      ASSERT_EQ(std::memcmp(&sum[i], &s, 4), 0) << dtype_name(t) << " widen+add " << i;
    }
    std::mt19937 g(5);
    std::vector<float> f(100003);
    for (float& x : f) {
      uint32_t bits = g();
      std::memcpy(&x, &bits, 4);
    }
    for (int div : {1, 3}) {
      std::vector<uint16_t> out(f.size());
      narrow_from_f32(t, out.data(), f.data(), f.size(), div);
      for (size_t i = 0; i < f.size(); ++i) {
        const uint16_t want = to_h(div == 1 ? f[i] : f[i] / static_cast<float>(div));
        if (std::isnan(f[i])) ASSERT_TRUE(std::isnan(to_f(out[i]))) << i;
        else ASSERT_EQ(out[i], want) << dtype_name(t) << " narrow of " << f[i] << " / " << div;
      }
    }
  }
}
