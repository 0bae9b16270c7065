// A UCX subset of the collective matrix: thread-ranks over the UCX transport, 2-4 ranks, every
// algorithm of every collective, a few sizes, both placements (checks as in collective_check.h).
#include "collective_runner.h"

using namespace weft;
using namespace weft::test;

namespace {

class UcxSubset : public ::testing::TestWithParam<int> {};

TEST_P(UcxSubset, EveryAlgorithmFewSizes) {
  const int n = GetParam();
  for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather,
                    CollectiveKind::kBroadcast, CollectiveKind::kReduce, CollectiveKind::kAllToAll,
                    CollectiveKind::kBarrier}) {
    std::vector<CollCase> cases;
    for (unsigned long long count : {1ull, 13ull, 1009ull, 300007ull})
      for (bool in_place : {false, true})
        for (RedOp op : {RedOp::kSum, RedOp::kAvg}) {
          if (kind == CollectiveKind::kBarrier && (count > 1 || in_place || op != RedOp::kSum)) continue;
          cases.push_back({kind, op == RedOp::kSum ? DataType::kFloat32 : DataType::kBfloat16, op,
                           kind == CollectiveKind::kBarrier ? 0 : count, n, n - 1, in_place});
        }
    for (const AlgoChoice& algo : algo_choices(kind)) {
      SCOPED_TRACE(std::string(collective_name(kind)) + " " + algo.label());
      run_cases(TransportKind::kUcx, algo, n, cases);
      run_cases(TransportKind::kShm, algo, n, cases);  // Weft's shared-memory transport, same cases
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, UcxSubset, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
