// Every collective x type x op x algorithm x size x rank count, out of place and in place, over
// the in-process transport, against the serial reference of collective_check.h (see there for
// why the comparisons are exact, or within one unit in the last place for averages). Plus
// determinism (bitwise-identical results across ranks and runs) and a rounding bound for
// float16/bfloat16 with random inputs.
#include <cmath>
#include <cstring>
#include <random>

#include "collective_runner.h"

using namespace weft;
using namespace weft::test;

namespace {

constexpr DataType kTypes[] = {DataType::kInt8,    DataType::kUint8,    DataType::kInt32,   DataType::kInt64,
                               DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64};
constexpr RedOp kOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax, RedOp::kAvg};
constexpr unsigned long long kBig = (1ull << 20) + 3;

bool reducing(CollectiveKind k) {
  return k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduceScatter || k == CollectiveKind::kReduce;
}

std::vector<CollCase> matrix(CollectiveKind kind, int n) {
  std::vector<CollCase> out;
  if (kind == CollectiveKind::kBarrier) return {CollCase{kind, DataType::kFloat32, RedOp::kSum, 0, n, 0, false}};
  const bool rooted = kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce;
  std::vector<int> roots = rooted && n > 1 ? std::vector<int>{0, n - 1} : std::vector<int>{0};
  for (DataType dt : kTypes) {
    for (RedOp op : kOps) {
      if (!reducing(kind) && op != RedOp::kSum) continue;
      for (uint64_t count : {0ull, 1ull, 2ull, 7ull, 13ull, 1009ull, kBig}) {
        if (count == kBig) {
          // The large size: float32 and bfloat16, sum and avg, 2, 3 and 5 ranks.
          if (dt != DataType::kFloat32 && dt != DataType::kBfloat16) continue;
          if (op != RedOp::kSum && op != RedOp::kAvg) continue;
          if (n != 2 && n != 3 && n != 5) continue;
        }
        for (bool in_place : {false, true})
          for (int root : roots) {
            if (root != 0 && count > 13) continue;  // a second root for the small sizes
            out.push_back({kind, dt, op, count, n, root, in_place});
          }
      }
    }
  }
  return out;
}

struct Param {
  CollectiveKind kind;
  int n;
};

class InprocMatrix : public ::testing::TestWithParam<Param> {};

TEST_P(InprocMatrix, EveryAlgorithmTypeOpSizeAndPlacement) {
  const Param p = GetParam();
  const auto cases = matrix(p.kind, p.n);
  for (const AlgoChoice& algo : algo_choices(p.kind)) {
    SCOPED_TRACE(algo.label());
    run_cases(TransportKind::kInproc, algo, p.n, cases);
  }
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather,
                    CollectiveKind::kBroadcast, CollectiveKind::kReduce, CollectiveKind::kAllToAll,
                    CollectiveKind::kBarrier})
    for (int n : {1, 2, 3, 4, 5, 8}) out.push_back({kind, n});
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, InprocMatrix, ::testing::ValuesIn(params()), [](const auto& info) {
  return std::string(collective_name(info.param.kind)) + "_n" + std::to_string(info.param.n);
});

// Multi-node layouts (node ids per rank; the inproc transport carries every pair either way): the
// hierarchical all-reduce, the ring, and the automatic choice (the cost model's, across nodes).
TEST(InprocNodeLayouts, AllReduceHierRingAndAutomatic) {
  for (auto [nodes, per] : std::vector<std::pair<int, int>>{{2, 2}, {3, 2}, {4, 1}}) {
    const int n = nodes * per;
    std::vector<std::string> ids;
    for (int r = 0; r < n; ++r) ids.push_back("node" + std::to_string(r / per));
    std::vector<CollCase> cases;
    for (CollCase c : matrix(CollectiveKind::kAllReduce, n)) {
      if (c.count == kBig && n != 4) continue;
      cases.push_back(c);
    }
    for (uint64_t count : {kBig, 3ull * 1000003}) cases.push_back({CollectiveKind::kAllReduce, DataType::kFloat32, RedOp::kSum, count, n, 0, false});
    for (const char* id : {"hier", "ring", ""}) {
      SCOPED_TRACE(fmt::format("{} nodes x {}: {}", nodes, per, *id ? id : "automatic"));
      run_cases(TransportKind::kInproc, AlgoChoice{id, 1}, n, cases, ids);
    }
  }
}

// Random float32 inputs of widely varying magnitude: any change in the order of combination would
// change the bits.
float random_input(int rank, uint64_t i, int run_salt) {
  (void)run_salt;  // the same inputs on both runs
  std::mt19937 g(static_cast<uint32_t>(rank * 1000003 + i));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  return std::ldexp(u(g), static_cast<int>(g() % 20) - 10);
}

TEST(Determinism, BitwiseIdenticalOnEveryRankAndRun) {
  for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kReduce}) {
    for (const AlgoChoice& algo : algo_choices(kind)) {
      for (int n : {3, 5, 8}) {
        const uint64_t count = 4099;
        CommConfig cfg = test_config();
        cfg.algo = algo.id;
        cfg.channels = algo.channels;
        cfg.slice_bytes = 4096;  // many slices: the pipeline reorders completions
        std::vector<std::vector<uint32_t>> results(n);  // per rank, both runs concatenated
        run_ranks(
            n, TransportKind::kInproc,
            [&](Communicator& comm) {
              const int r = comm.rank();
              const uint64_t in = kind == CollectiveKind::kReduceScatter ? count * n : count;
              for (int run = 0; run < 2; ++run) {
                std::vector<float> send(in), recv(count, 0.0f);
                for (uint64_t i = 0; i < in; ++i) send[i] = random_input(r, i, run);
                CollectiveArgs a{kind, count, DataType::kFloat32, RedOp::kSum, 1, false};
                comm.submit(a, send.data(), recv.data());
                for (float f : recv) {
                  uint32_t bits;
                  std::memcpy(&bits, &f, 4);
                  results[r].push_back(bits);
                }
              }
            },
            cfg);
        for (int r = 0; r < n; ++r) {
          bool has_result = kind != CollectiveKind::kReduce || r == 1;
          if (!has_result) continue;
          ASSERT_TRUE(std::equal(results[r].begin(), results[r].begin() + count, results[r].begin() + count))
              << algo.label() << " " << collective_name(kind) << " n=" << n << " rank " << r << ": runs differ";
          if (kind == CollectiveKind::kAllReduce) {
            ASSERT_EQ(results[r], results[0]) << algo.label() << " n=" << n << ": rank " << r << " differs from rank 0";
          }
        }
      }
    }
  }
}

// Random 16-bit inputs: every combination rounds once to the type (the kernels widen to float32,
// combine and round back), and any order of summing n values performs n-1 combinations, so the
// error is at most (n-1) * u * sum|x_i| with u = 2^-11 (float16) or 2^-8 (bfloat16), the unit
// roundoff (half an ulp at 1). Values lie in [-1, 1], far from overflow and (mostly) subnormals;
// 2^-24 absorbs float16 subnormal rounding.
TEST(Rounding16, RandomInputsWithinTheSummationBound) {
  for (DataType dt : {DataType::kFloat16, DataType::kBfloat16}) {
    const double u = dt == DataType::kFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    for (const AlgoChoice& algo : algo_choices(CollectiveKind::kAllReduce)) {
      for (int n : {3, 5, 8}) {
        const uint64_t count = 2053;
        auto value = [&](int r, uint64_t i) {
          std::mt19937 g(static_cast<uint32_t>(r * 7919 + i));
          float x = std::uniform_real_distribution<float>(-1.0f, 1.0f)(g);
          return dt == DataType::kFloat16 ? float_to_half(x) : float_to_bf16(x);
        };
        auto to_double = [&](uint16_t h) { return dt == DataType::kFloat16 ? half_to_float(h) : bf16_to_float(h); };
        CommConfig cfg = test_config();
        cfg.algo = algo.id;
        cfg.channels = algo.channels;
        std::atomic<int> bad{0};
        run_ranks(
            n, TransportKind::kInproc,
            [&](Communicator& comm) {
              std::vector<uint16_t> send(count), recv(count);
              for (uint64_t i = 0; i < count; ++i) send[i] = value(comm.rank(), i);
              CollectiveArgs a{CollectiveKind::kAllReduce, count, dt, RedOp::kSum, 0, false};
              comm.submit(a, send.data(), recv.data());
              for (uint64_t i = 0; i < count; ++i) {
                double exact = 0, mag = 0;
                for (int q = 0; q < n; ++q) exact += to_double(value(q, i)), mag += std::fabs(to_double(value(q, i)));
                double tol = (n - 1) * u * mag + std::ldexp(1.0, -24);
                if (std::fabs(to_double(recv[i]) - exact) > tol && bad++ < 5)
                  ADD_FAILURE() << algo.label() << " " << dtype_name(dt) << " n=" << n << " element " << i << ": got "
                                << to_double(recv[i]) << ", exact " << exact << ", bound " << tol;
              }
            },
            cfg);
      }
    }
  }
}

}  // namespace
