// The automatic choice: the cost model's ranking (plan.cc) mapped onto the algorithms Weft
// implements (collectives/algorithms). Kept apart from plan.cc so that the planner builds without
// the collectives (the topology fuzzers compile it alone).
#include <algorithm>

#include "collectives/collective.h"
#include "topology/plan.h"

namespace weft::topo {

std::string choose_weft_algorithm(const NodeSummary& node, int nodes, int ranks_per_node, Collective coll, size_t bytes,
                                  const CostModel& model) {
  const int nranks = std::max(1, nodes) * std::max(1, ranks_per_node);
  CollectiveKind kind = CollectiveKind::kAllReduce;
  switch (coll) {
    case Collective::kAllReduce: kind = CollectiveKind::kAllReduce; break;
    case Collective::kReduceScatter: kind = CollectiveKind::kReduceScatter; break;
    case Collective::kAllGather: kind = CollectiveKind::kAllGather; break;
    case Collective::kBroadcast: kind = CollectiveKind::kBroadcast; break;
    case Collective::kReduce: kind = CollectiveKind::kReduce; break;
  }
  // Rooted collectives: Weft's chain and binomial tree are chosen by their measured crossover
  // (default_algorithm), which the runtime uses as well; the model's trees are not Weft's.
  if (coll == Collective::kBroadcast || coll == Collective::kReduce) {
    const weft::Algorithm* a = default_algorithm(kind, bytes, nranks);
    return a ? a->id : "";
  }
  auto plans = rank_plans(make_uniform_cluster(node, nodes, ranks_per_node), coll, bytes, model);
  // Only plans that Weft implements for this collective (reduce-scatter and all-gather: ring and
  // hier). Where another algorithm is predicted to be at most 5% faster than the flat ring, the
  // ring runs: the model cannot tell such plans apart, and the ring is the one whose pipelining
  // keeps the measurement closest to its prediction (docs/PERFORMANCE.md, "Emulated cluster": on
  // 4x1 nodes halving-doubling was predicted 0.1% faster and measured 15% slower).
  double ring_us = -1;
  for (const auto& p : plans)
    if (p.plan.algorithm == Algorithm::kRing) ring_us = p.predicted_us;
  for (const auto& p : plans) {
    std::string id = weft_algorithm_id(p.plan.algorithm);
    if (!find_algorithm(id, kind)) continue;
    if (ring_us >= 0 && ring_us <= p.predicted_us * 1.05) return "ring";
    return id;
  }
  return "ring";
}

}  // namespace weft::topo
