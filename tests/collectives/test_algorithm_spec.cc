// WEFT_ALGO / weftCommSetAlgorithm specs (collectives/algorithm_spec.h): plain ids, per-collective
// sections with size ranges, and a clear error for every kind of bad spec. Also the native rows'
// eligibility and the chain the dispatcher tries (native_chain).
#include <gtest/gtest.h>

#include <string>

#include "collectives/algorithm_spec.h"
#include "runtime/base/error.h"

namespace weft {
namespace {

using K = CollectiveKind;

std::string id_of(const AlgorithmSpec& s, K kind, uint64_t bytes) {
  const Algorithm* a = s.resolve(kind, bytes);
  return a ? a->id : "";
}

std::string error_of(const std::string& text) {
  try {
    AlgorithmSpec::parse(text, "WEFT_ALGO");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << text;
    return e.what();
  }
  return "";
}

TEST(AlgorithmSpec, EmptyIsAutomaticEverywhere) {
  const AlgorithmSpec s = AlgorithmSpec::parse("", "WEFT_ALGO");
  EXPECT_TRUE(s.empty());
  for (int k = 0; k < kNumCollectiveKinds; ++k) EXPECT_EQ(s.resolve(static_cast<K>(k), 8), nullptr);
}

TEST(AlgorithmSpec, PlainIdAppliesToTheCollectivesThatHaveIt) {
  const AlgorithmSpec ring = AlgorithmSpec::parse("ring", "WEFT_ALGO");
  EXPECT_EQ(id_of(ring, K::kAllReduce, 8), "ring");
  EXPECT_EQ(id_of(ring, K::kAllGather, 1 << 30), "ring");
  EXPECT_EQ(id_of(ring, K::kBroadcast, 8), "");  // no ring broadcast: automatic
  const AlgorithmSpec chain = AlgorithmSpec::parse("chain", "WEFT_ALGO");
  EXPECT_EQ(id_of(chain, K::kAllReduce, 8), "");
  EXPECT_EQ(id_of(chain, K::kReduce, 8), "chain");
  EXPECT_EQ(chain.describe(), "broadcast (chain), reduce (chain)");
  // Every row can be named, native ones included.
  EXPECT_EQ(id_of(AlgorithmSpec::parse("direct", "WEFT_ALGO"), K::kBarrier, 0), "direct");
  EXPECT_EQ(id_of(AlgorithmSpec::parse("window", "WEFT_ALGO"), K::kAllReduce, 1 << 20), "window");
}

TEST(AlgorithmSpec, RangesPerCollective) {
  const AlgorithmSpec s = AlgorithmSpec::parse("allreduce:0-32K:direct,32K-:ring", "WEFT_ALGO");
  EXPECT_EQ(id_of(s, K::kAllReduce, 0), "direct");
  EXPECT_EQ(id_of(s, K::kAllReduce, 32767), "direct");
  EXPECT_EQ(id_of(s, K::kAllReduce, 32768), "ring");
  EXPECT_EQ(id_of(s, K::kAllReduce, uint64_t{1} << 40), "ring");
  EXPECT_EQ(id_of(s, K::kBroadcast, 8), "");  // not named: automatic
  EXPECT_EQ(s.describe(), "allreduce (0 B-32 KiB: direct, 32 KiB-: ring)");
}

TEST(AlgorithmSpec, GapsAreAutomaticUnlessAnEntryHasNoRange) {
  const AlgorithmSpec gaps = AlgorithmSpec::parse("allreduce:1K-4K:rhd;broadcast:0-1M:binomial", "WEFT_ALGO");
  EXPECT_EQ(id_of(gaps, K::kAllReduce, 100), "");
  EXPECT_EQ(id_of(gaps, K::kAllReduce, 2048), "rhd");
  EXPECT_EQ(id_of(gaps, K::kAllReduce, 4096), "");
  EXPECT_EQ(id_of(gaps, K::kBroadcast, 4096), "binomial");
  const AlgorithmSpec rest = AlgorithmSpec::parse("allreduce:1K-4K:rhd,tree", "WEFT_ALGO");
  EXPECT_EQ(id_of(rest, K::kAllReduce, 100), "tree");
  EXPECT_EQ(id_of(rest, K::kAllReduce, 2048), "rhd");
  EXPECT_EQ(id_of(rest, K::kAllReduce, 1 << 20), "tree");
  EXPECT_EQ(id_of(AlgorithmSpec::parse("alltoall:pairwise", "WEFT_ALGO"), K::kAllToAll, 8), "pairwise");
  EXPECT_EQ(id_of(AlgorithmSpec::parse("allreduce:0-1.5K:rhd", "WEFT_ALGO"), K::kAllReduce, 1535), "rhd");
}

TEST(AlgorithmSpec, BadSpecsNameTheProblem) {
  EXPECT_NE(error_of("rign").find("unknown algorithm 'rign' (known: window, direct, pieces, ring"), std::string::npos);
  EXPECT_NE(error_of("allreduse:ring").find("unknown collective 'allreduse' (known: allreduce"), std::string::npos);
  EXPECT_NE(error_of("allreduce:chain").find("allreduce has no algorithm 'chain' (its algorithms: window, direct, pieces, ring"),
            std::string::npos);
  EXPECT_NE(error_of("allreduce:32K-0:ring").find("the range '32K-0' is empty"), std::string::npos);
  EXPECT_NE(error_of("allreduce:0-8K:ring,4K-:rhd").find("the allreduce ranges '4K-' and 0 B-8 KiB overlap"), std::string::npos);
  EXPECT_NE(error_of("allreduce:0-1Q:ring").find("bad size '1Q' in the range '0-1Q'"), std::string::npos);
  EXPECT_NE(error_of("allreduce:32K:ring").find("the range '32K' is not low-high"), std::string::npos);
  EXPECT_NE(error_of("allreduce:ring,").find("an empty entry in the allreduce section"), std::string::npos);
  EXPECT_NE(error_of("allreduce:ring;").find("an empty section"), std::string::npos);
  EXPECT_NE(error_of("allreduce:ring;ring").find("the section 'ring' names no collective"), std::string::npos);
  EXPECT_NE(error_of("allreduce:ring;allreduce:rhd").find("allreduce has two sections"), std::string::npos);
  EXPECT_NE(error_of("allreduce:ring,rhd").find("allreduce has two entries without a size range"), std::string::npos);
  EXPECT_NE(error_of("send:ring").find("unknown collective 'send'"), std::string::npos);
  EXPECT_NE(error_of("rign").find("WEFT_ALGO"), std::string::npos);
}

CallShape one_node(K kind, uint64_t bytes, bool oversubscribed = false, uint32_t windows = 0) {
  CallShape s;
  s.kind = kind;
  s.bytes = bytes;
  s.nranks = 4;
  s.node_memory = true;
  s.limits = direct_limits(-1, -1, oversubscribed);
  s.windows = windows;
  return s;
}

std::string chain_of(const CallShape& s, const Algorithm* forced = nullptr) {
  const Chain c = native_chain(s, forced);
  std::string out;
  for (int i = 0; i < c.size; ++i) out += (i ? " " : "") + std::string(c.rows[i]->id);
  return out;
}

TEST(NativeRows, EligibilityAndTheChain) {
  EXPECT_EQ(chain_of(one_node(K::kAllReduce, 8)), "direct");
  EXPECT_EQ(chain_of(one_node(K::kAllReduce, 32 << 10)), "direct");
  EXPECT_EQ(chain_of(one_node(K::kAllReduce, (32 << 10) + 1)), "");  // a schedule
  EXPECT_EQ(chain_of(one_node(K::kAllReduce, 1 << 20, true)), "pieces");
  EXPECT_EQ(chain_of(one_node(K::kAllReduce, 1 << 20, false, 1)), "window");
  EXPECT_EQ(chain_of(one_node(K::kAllReduce, 1 << 20, true, 1)), "window pieces");  // window may decline
  EXPECT_EQ(chain_of(one_node(K::kAllGather, 200 << 10, true)), "direct");
  EXPECT_EQ(chain_of(one_node(K::kAllToAll, 8)), "");
  EXPECT_EQ(chain_of(one_node(K::kBarrier, 0)), "direct");
  CallShape two_nodes = one_node(K::kAllReduce, 8);
  two_nodes.node_memory = false;
  EXPECT_EQ(chain_of(two_nodes), "");
  // A forced schedule row: no native row; a forced native row first, where it takes the call.
  EXPECT_EQ(chain_of(one_node(K::kAllReduce, 8), find_algorithm("ring", K::kAllReduce)), "");
  EXPECT_EQ(chain_of(one_node(K::kAllReduce, 1 << 20, true), find_algorithm("pieces", K::kAllReduce)), "pieces");
  EXPECT_EQ(chain_of(one_node(K::kAllReduce, 8), find_algorithm("pieces", K::kAllReduce)), "direct");
  // WEFT_DIRECT_BYTES=0 takes nothing in one round.
  CallShape off = one_node(K::kAllReduce, 8);
  off.limits = direct_limits(0, -1, false);
  EXPECT_EQ(chain_of(off), "");
}

TEST(NativeRows, AreInTheTableWithoutSchedules) {
  for (const char* id : {"window", "direct", "pieces"}) {
    const Algorithm* a = find_algorithm(id, K::kAllReduce);
    ASSERT_NE(a, nullptr) << id;
    EXPECT_TRUE(a->native()) << id;
    EXPECT_NE(a->eligible, nullptr) << id;
    EXPECT_NE(a->predict, nullptr) << id;
  }
  // The default schedule choice is never a native row.
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    if (const Algorithm* a = default_algorithm(static_cast<K>(k), 8, 4)) {
      EXPECT_FALSE(a->native()) << a->id;
    }
  }
}

}  // namespace
}  // namespace weft
