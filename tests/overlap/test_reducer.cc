// The reducer over thread-ranks (in-process transport): results against the exact average/sum,
// copy and bucket-view modes, launch order, rebuild, no_sync, unused parameters, compression.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "reducer_fixture.h"

using namespace weft;
using namespace weft::overlap;
using namespace weft::overlap::test;

namespace {

void check_results(Reducer& red, Model& m, int n, bool view, bool average, std::vector<int> steps = {0}) {
  for (size_t p = 0; p < m.grads.size(); ++p) {
    const float* g = grad_ptr(red, m, static_cast<int>(p), view);
    for (uint64_t i = 0; i < m.grads[p].size(); ++i) {
      ASSERT_EQ(g[i], expected_value(n, static_cast<int>(p), i, average, steps)) << "param " << p << " element " << i;
    }
  }
}

}  // namespace

class CopyAndView : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

// Ranks mark their parameters in different (random) orders; the buckets still go out in the same
// order everywhere (a different order would fail the runtime's per-message signature check), and
// the results equal the exact average or sum, for three steps (the second after the rebuild).
TEST_P(CopyAndView, ResultsEqualTheReferenceWhateverTheMarkOrder) {
  auto [view, average] = GetParam();
  const int n = 4;
  run_ranks(n, TransportKind::kInproc, [&](Communicator& c) {
    ReducerOptions o = small_caps();
    o.gradient_as_bucket_view = view;
    o.average = average;
    Reducer red(shared(c), o);
    Model m = make_model(red, toy_sizes(), view);
    EXPECT_GT(red.buckets().size(), 2u);
    for (int step = 0; step < 3; ++step) {
      red.begin_step();
      fill_grads(red, m, c.rank(), view);
      for (int p : shuffled(static_cast<int>(m.grads.size()), 100 * step + c.rank())) red.mark_ready(p);
      StepStats s = red.finalize();
      EXPECT_TRUE(s.synced);
      EXPECT_EQ(s.step, static_cast<uint64_t>(step + 1));
      check_results(red, m, n, view, average);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Overlap, CopyAndView,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "View" : "Copy") +
                                  (std::get<1>(info.param) ? "Average" : "Sum");
                         });

// Host gradients: the stream variants are the plain calls (the stream is never touched, so even a
// bogus handle is fine), and the reducer stays on the host.
TEST(Reducer, StreamVariantsOnHostGradientsAreThePlainCalls) {
  const int n = 2;
  run_ranks(n, TransportKind::kInproc, [&](Communicator& c) {
    Reducer red(shared(c), small_caps());
    Model m = make_model(red, toy_sizes(), false);
    EXPECT_FALSE(red.on_device());
    void* bogus = reinterpret_cast<void*>(uintptr_t{0x1});
    for (int step = 0; step < 2; ++step) {
      red.begin_step();
      fill_grads(red, m, c.rank(), false);
      for (int p = static_cast<int>(m.grads.size()) - 1; p >= 0; --p) red.mark_ready(p, bogus);
      EXPECT_TRUE(red.finalize(bogus).synced);
      check_results(red, m, n, false, true);
    }
  });
}

TEST(Reducer, MixedTypesGetTheirOwnBuckets) {
  run_ranks(2, TransportKind::kInproc, [&](Communicator& c) {
    Reducer red(shared(c));
    std::vector<float> a(100, 1.0f + c.rank());
    std::vector<double> b(50, 10.0 * (c.rank() + 1));
    std::vector<int32_t> k(7, 3 * (c.rank() + 1));
    red.add_param(a.data(), a.size(), DataType::kFloat32, "a");
    red.add_param(b.data(), b.size(), DataType::kFloat64, "b");
    red.add_param(k.data(), k.size(), DataType::kInt32, "k");
    auto bk = red.buckets();
    ASSERT_EQ(bk.size(), 3u);
    EXPECT_EQ(bk[0].dtype, DataType::kInt32);
    red.mark_ready(2);
    red.mark_ready(0);
    red.mark_ready(1);
    red.finalize();
    EXPECT_EQ(a[0], 1.5f);
    EXPECT_EQ(b[49], 15.0);
    EXPECT_EQ(k[6], 4);  // (3 + 6) / 2, truncated
  });
}

// After the first synced step, every rank adopts rank 0's ready order (bucket 0 = the first
// gradients rank 0 saw), even though rank 1 saw them in another order.
TEST(Reducer, RebuildFollowsRankZerosReadyOrderOnAllRanks) {
  const int n = 2;
  std::vector<std::vector<std::vector<int>>> layouts(n);
  run_ranks(n, TransportKind::kInproc, [&](Communicator& c) {
    ReducerOptions o = small_caps();
    Reducer red(shared(c), o);
    Model m = make_model(red, toy_sizes(), false);
    int np = static_cast<int>(m.grads.size());
    auto before = red.buckets();
    EXPECT_EQ(before.front().params.front(), np - 1);  // reverse registration order
    fill_grads(red, m, c.rank(), false);
    // Rank 0: forward order (the opposite of the initial layout); rank 1: random.
    std::vector<int> order(np);
    std::iota(order.begin(), order.end(), 0);
    if (c.rank() == 1) order = shuffled(np, 7);
    for (int p : order) red.mark_ready(p);
    red.finalize();
    EXPECT_EQ(red.layout_generation(), 1u);
    auto after = red.buckets();  // the layout the next step will use
    std::vector<int> flat;
    for (auto& b : after) flat.insert(flat.end(), b.params.begin(), b.params.end());
    std::vector<int> forward(np);
    std::iota(forward.begin(), forward.end(), 0);
    EXPECT_EQ(flat, forward);
    for (auto& b : after) layouts[c.rank()].push_back(b.params);
    red.begin_step();
    EXPECT_EQ(red.layout_generation(), 2u);
    fill_grads(red, m, c.rank(), false, 1);
    for (int p : shuffled(np, 11 + c.rank())) red.mark_ready(p);
    red.finalize();
    check_results(red, m, n, false, true, {1});
  });
  EXPECT_EQ(layouts[0], layouts[1]);
}

TEST(Reducer, NoSyncAccumulatesThenSyncsTheSum) {
  for (bool view : {false, true}) {
    run_ranks(2, TransportKind::kInproc, [&](Communicator& c) {
      ReducerOptions o = small_caps();
      o.gradient_as_bucket_view = view;
      Reducer red(shared(c), o);
      Model m = make_model(red, toy_sizes(), view);
      int np = static_cast<int>(m.grads.size());
      red.begin_step(false);  // micro-batch 1: no communication
      fill_grads(red, m, c.rank(), view, 0);
      for (int p = np - 1; p >= 0; --p) red.mark_ready(p);
      StepStats s1 = red.finalize();
      EXPECT_FALSE(s1.synced);
      EXPECT_EQ(s1.comm_ms, 0.0);
      EXPECT_EQ(s1.buckets, 0);
      red.begin_step(true);  // micro-batch 2: accumulate, then all-reduce the sum
      fill_grads(red, m, c.rank(), view, 1, /*accumulate=*/true);
      for (int p = np - 1; p >= 0; --p) red.mark_ready(p);
      StepStats s2 = red.finalize();
      EXPECT_TRUE(s2.synced);
      check_results(red, m, 2, view, true, {0, 1});
    });
  }
}

// Overlap happens: with backward compute between the marks (a 30 ms sleep after each gradient),
// every bucket but the last is all-reduced while "backward" still runs, so part of the
// communication is hidden (overlap ratio > 0, exposed < total), over the real node transport.
TEST(Reducer, BucketsAllReduceWhileTheBackwardStillRuns) {
  run_ranks(2, TransportKind::kUcx, [&](Communicator& c) {
    Reducer red(shared(c), small_caps());
    Model m = make_model(red, toy_sizes(), false);
    const int np = static_cast<int>(m.grads.size());
    red.begin_step(true);
    fill_grads(red, m, c.rank(), false);
    for (int p = np - 1; p >= 0; --p) {
      red.mark_ready(p);
      if (p > 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    StepStats s = red.finalize();
    check_results(red, m, 2, false, true);
    EXPECT_GE(s.buckets, 3);
    EXPECT_GT(s.comm_ms, 0.0);
    EXPECT_LT(s.exposed_comm_ms, s.comm_ms);
    EXPECT_GT(s.overlap_ratio, 0.0);
    if (c.rank() == 0)
      std::printf("[ figure ] %d buckets, comm %.3f ms, exposed %.3f ms, overlap ratio %.2f\n", s.buckets, s.comm_ms,
                  s.exposed_comm_ms, s.overlap_ratio);
  });
}

TEST(Reducer, UnusedParametersContributeZeros) {
  for (bool find_unused : {false, true}) {
    run_ranks(2, TransportKind::kInproc, [&](Communicator& c) {
      ReducerOptions o = small_caps();
      o.find_unused = find_unused;
      Reducer red(shared(c), o);
      Model m = make_model(red, toy_sizes(), false);
      fill_grads(red, m, c.rank(), false);
      const int skipped = 2;  // rank 1 never computes a gradient for parameter 2
      for (int p = static_cast<int>(m.grads.size()) - 1; p >= 0; --p) {
        if (p != skipped || c.rank() == 0) red.mark_ready(p);
        else if (!find_unused) red.mark_unused(p);
      }
      red.finalize();
      for (uint64_t i = 0; i < m.grads[skipped].size(); ++i) {
        ASSERT_EQ(m.grads[skipped][i], grad_value(0, skipped, i) / 2) << i;
      }
      EXPECT_EQ(m.grads[0][3], expected_value(2, 0, 3, true));
    });
  }
}

// float16/bfloat16 on the wire. Each rank's value x/n is rounded once (relative error <= u), then
// n-1 partial sums are each rounded (<= u of a partial sum <= sum|x|/n); decompression is exact.
// So |error| <= n * u * max|x| plus, for float16, n half-ulps of the subnormal range (2^-25).
TEST(Reducer, CompressedBucketsStayWithinTheRoundingBound) {
  for (Compression comp : {Compression::kFloat16, Compression::kBfloat16}) {
    const int n = 4;
    const double u = comp == Compression::kFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    std::vector<std::vector<float>> inputs(n);
    for (int r = 0; r < n; ++r) {
      std::mt19937 rng(r + 1);
      std::uniform_real_distribution<float> d(-1.0f, 1.0f);
      for (int i = 0; i < 5000; ++i) inputs[r].push_back(d(rng));
    }
    run_ranks(n, TransportKind::kInproc, [&](Communicator& c) {
      ReducerOptions o = small_caps();
      o.compression = comp;
      Reducer red(shared(c), o);
      std::vector<float> a(inputs[c.rank()].begin(), inputs[c.rank()].begin() + 3000);
      std::vector<float> b(inputs[c.rank()].begin() + 3000, inputs[c.rank()].end());
      red.add_param(a.data(), a.size(), DataType::kFloat32, "a");
      red.add_param(b.data(), b.size(), DataType::kFloat32, "b");
      red.mark_ready(1);
      red.mark_ready(0);
      StepStats s = red.finalize();
      EXPECT_EQ(s.wire_bytes, 5000u * 2);  // half of float32's
      double bound = n * u * 1.0 + n * std::ldexp(1.0, -25);
      for (int i = 0; i < 5000; ++i) {
        double exact = 0;
        for (int r = 0; r < n; ++r) exact += inputs[r][i];
        exact /= n;
        float got = i < 3000 ? a[i] : b[i - 3000];
        ASSERT_LE(std::fabs(got - exact), bound) << compression_name(comp) << " element " << i;
      }
    });
  }
}
