// Bucket assignment: reverse order, one type per bucket, first-bucket and general caps, and the
// layout hash. Plus timeline path rules and the 16-bit conversions.
#include <gtest/gtest.h>

#include <cmath>

#include "collectives/reduce_kernels.h"
#include "overlap/bucket_plan.h"
#include "overlap/compression.h"
#include "overlap/timeline.h"
#include "runtime/base/error.h"

using namespace weft;
using namespace weft::overlap;

namespace {

std::vector<ParamSpec> specs(const std::vector<std::pair<uint64_t, DataType>>& v) {
  std::vector<ParamSpec> out;
  for (auto& [n, t] : v) out.push_back(ParamSpec{n, t, ""});
  return out;
}

std::vector<int> reversed(size_t n) {
  std::vector<int> o;
  for (int i = static_cast<int>(n) - 1; i >= 0; --i) o.push_back(i);
  return o;
}

}  // namespace

TEST(BucketPlan, ReverseOrderFirstCapThenCap) {
  // bytes: 200 200 200 200 1200 200 (float32); first cap 400, cap 1000.
  auto p = specs({{50, DataType::kFloat32}, {50, DataType::kFloat32}, {50, DataType::kFloat32},
                  {50, DataType::kFloat32}, {300, DataType::kFloat32}, {50, DataType::kFloat32}});
  auto b = plan_buckets(p, reversed(p.size()), 1000, 400);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].params, (std::vector<int>{5}));     // 5 fits the first cap; 4 would not
  EXPECT_EQ(b[1].params, (std::vector<int>{4}));     // larger than the cap: alone
  EXPECT_EQ(b[2].params, (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(b[2].offsets, (std::vector<uint64_t>{0, 50, 100, 150}));
  EXPECT_EQ(b[2].count, 200u);
  for (const auto& x : b) EXPECT_TRUE(x.bytes() <= 1000 || x.params.size() == 1);
}

TEST(BucketPlan, OneTypePerBucketAndDefaultsLikeDdp) {
  auto p = specs({{1000, DataType::kFloat32}, {1000, DataType::kFloat64}, {1000, DataType::kFloat32},
                  {1000, DataType::kFloat64}});
  auto b = plan_buckets(p, reversed(p.size()), 25u << 20, 1u << 20);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].dtype, DataType::kFloat64);  // parameter 3 comes first in reverse order
  EXPECT_EQ(b[0].params, (std::vector<int>{3, 1}));
  EXPECT_EQ(b[1].dtype, DataType::kFloat32);
  EXPECT_EQ(b[1].params, (std::vector<int>{2, 0}));

  // 40 parameters of 1 MiB: the first bucket holds one, then 25 per bucket.
  std::vector<ParamSpec> big(40, ParamSpec{1u << 18, DataType::kFloat32, ""});
  auto bb = plan_buckets(big, reversed(big.size()), 25u << 20, 1u << 20);
  ASSERT_EQ(bb.size(), 3u);
  EXPECT_EQ(bb[0].params.size(), 1u);
  EXPECT_EQ(bb[1].params.size(), 25u);
  EXPECT_EQ(bb[2].params.size(), 14u);
}

TEST(BucketPlan, ExplicitOrderAndHash) {
  auto p = specs({{10, DataType::kFloat32}, {10, DataType::kFloat32}, {10, DataType::kFloat32}});
  auto a = plan_buckets(p, {0, 2, 1}, 80, 40);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].params, (std::vector<int>{0}));
  EXPECT_EQ(a[1].params, (std::vector<int>{2, 1}));
  auto b = plan_buckets(p, reversed(3), 80, 40);
  EXPECT_NE(layout_hash(a, p), layout_hash(b, p));
  EXPECT_EQ(layout_hash(a, p), layout_hash(plan_buckets(p, {0, 2, 1}, 80, 40), p));
  EXPECT_THROW(plan_buckets(p, {0, 3}, 80, 40), Error);
}

TEST(Timeline, RankPathRules) {
  EXPECT_EQ(Timeline::rank_path("/tmp/t.%r.json", 3), "/tmp/t.3.json");
  EXPECT_EQ(Timeline::rank_path("/tmp/t-{rank}.json", 2), "/tmp/t-2.json");
  EXPECT_EQ(Timeline::rank_path("/tmp/trace.json", 1), "/tmp/trace.1.json");
  EXPECT_EQ(Timeline::rank_path("/tmp/trace.1.json", 1), "/tmp/trace.1.json");  // weftrun's per-rank path
  EXPECT_EQ(Timeline::rank_path("/tmp/d.x/trace", 0), "/tmp/d.x/trace.0");
}

TEST(Compression, RoundTripsMatchTheScalarConversions) {
  std::vector<float> in;
  for (int i = -3000; i < 3000; ++i) in.push_back(static_cast<float>(i) * 0.37f + 1e-6f * i);
  in.push_back(INFINITY);
  in.push_back(-0.0f);
  std::vector<uint16_t> w(in.size());
  std::vector<float> out(in.size());
  compress(Compression::kFloat16, in.data(), w.data(), in.size(), 0.5f);
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(w[i], float_to_half(in[i] * 0.5f)) << i;
  decompress(Compression::kFloat16, w.data(), out.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], half_to_float(w[i])) << i;
  compress(Compression::kBfloat16, in.data(), w.data(), in.size(), 1.0f);
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(w[i], float_to_bf16(in[i])) << i;
  decompress(Compression::kBfloat16, w.data(), out.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], bf16_to_float(w[i])) << i;
}
