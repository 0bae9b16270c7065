// The planner (planner.h): ranks the predictions of the algorithm table, and the automatic choice.
#include "collectives/planner.h"

#include "topology/forest.h"

#include <algorithm>
#include <set>
#include <string_view>

namespace weft {

std::vector<topo::PlanCandidate> rank_plans(const topo::ClusterView& view, CollectiveKind coll, size_t bytes) {
  return rank_plans(view, coll, bytes, topo::CostModel::from_env());
}

std::vector<topo::PlanCandidate> rank_plans(const topo::ClusterView& view, CollectiveKind coll, size_t bytes,
                                            const topo::CostModel& m, uint64_t slice_bytes) {
  const topo::Plan base = topo::base_plan(view);
  const int p = view.size();
  const topo::NetGraph net(view, m);
  PlanInput in{view, m, base, coll, static_cast<double>(bytes),
               static_cast<double>(slice_bytes > 0 ? slice_bytes : kDefaultSliceBytes), &net};
  std::vector<topo::PlanCandidate> out;
  // An algorithm's time: its latency terms plus the slower of its data transfer and, where ranks
  // outnumber a machine's cores, the waits for a core of the `steps` steps on its critical path
  // (HostCpu; the link moves data while a rank waits; with ranks <= cores the wait is 0).
  const double wait = topo::host_wait_us(m.host, p);
  // The ideal: the worst cut's bound on the transfer (topology/forest.h), for every candidate to
  // show its distance to it. All-reduce = reduce-scatter + all-gather.
  double ideal = 0;
  if (p > 1 && (coll == CollectiveKind::kAllReduce || coll == CollectiveKind::kReduceScatter ||
                coll == CollectiveKind::kAllGather)) {
    const topo::CutBound cb = p <= topo::kForestExactRanks ? topo::packed_trees(net).bound : topo::allgather_cut_bound(net);
    ideal = (coll == CollectiveKind::kAllReduce ? 2 : 1) * cb.us_per_byte * static_cast<double>(bytes) / p;
  }
  std::set<std::string_view> seen;
  for (const Algorithm& a : algorithm_table()) {
    if (!a.predict || !seen.insert(a.id).second) continue;  // one prediction per id: its first row's
    Prediction pr;
    if (!a.predict(in, pr)) continue;
    double us = pr.lat_us + pr.xfer_us;
    if (const double cpu = pr.steps * wait; cpu > 0) {
      us = pr.lat_us + std::max(pr.xfer_us, cpu);
      pr.reasons.push_back(fmt::format(
          "{} ranks share {} cores: each of the {:.0f} steps in sequence waits {:.0f} us for a core, {:.0f} us in all{}",
          m.host.ranks, m.host.cores, pr.steps, wait, cpu,
          cpu > pr.xfer_us ? ", more than the transfer: the CPU sets the time" : ", hidden by the transfer"));
    }
    topo::Plan plan = base;
    plan.algorithm = a.id;
    plan.name = a.name ? a.name : a.id;
    plan.collective = coll;
    plan.bytes = bytes;
    plan.predicted_us = p > 1 ? us : 0.0;
    plan.ideal_us = ideal;
    plan.bottleneck_gbs = pr.b.gbs;
    plan.alpha_us = pr.b.alpha;
    plan.reasons = std::move(pr.reasons);
    out.push_back({std::move(plan), p > 1 ? us : 0.0});
  }
  std::stable_sort(out.begin(), out.end(), [](const topo::PlanCandidate& a, const topo::PlanCandidate& b) {
    return a.predicted_us < b.predicted_us;
  });
  return out;
}

std::string choose_algorithm(const topo::NodeSummary& node, int nodes, int ranks_per_node, CollectiveKind kind,
                             size_t bytes, const topo::CostModel& model, uint64_t slice_bytes) {
  const int nranks = std::max(1, nodes) * std::max(1, ranks_per_node);
  // Rooted collectives: Weft's chain and binomial tree are chosen by their measured crossover
  // (default_algorithm), which the runtime uses as well; the model's trees are not Weft's.
  if (kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce) {
    const Algorithm* a = default_algorithm(kind, bytes, nranks);
    return a ? a->id : "";
  }
  auto plans = rank_plans(topo::make_uniform_cluster(node, nodes, ranks_per_node), kind, bytes, model, slice_bytes);
  // Only plans that Weft implements for this collective (reduce-scatter and all-gather: ring and
  // hier). Where another algorithm is predicted to be at most 5% faster than the flat ring, the
  // ring runs: the model cannot tell such plans apart, and the ring is the one whose pipelining
  // keeps the measurement closest to its prediction (docs/PERFORMANCE.md, "Emulated cluster": on
  // 4x1 nodes halving-doubling was predicted 0.1% faster and measured 15% slower).
  // Likewise the packed trees (`forest`) replace the best of the others only when predicted at
  // least 5% faster: their schedule has the most messages, and the event level plays it 5-10%
  // slower than its closed form on the emulated cluster's layouts (3x2 at 64 MiB: forest and hier
  // within 0.01% in the closed form, forest 1.10x hier in the event level).
  double ring_us = -1;
  const topo::PlanCandidate* pick = nullptr;
  const topo::PlanCandidate* other = nullptr;  // the best that is not the packed trees
  CallShape shape;
  shape.kind = kind;
  shape.bytes = bytes;
  shape.nranks = nranks;
  for (const auto& p : plans) {
    // Schedule rows only: the native rows (one node's shared memory) are the dispatcher's to try
    // first, by their eligibility (native_chain). And only rows whose eligibility takes the call
    // (the packed trees: up to kForestExactRanks ranks).
    const Algorithm* row = find_algorithm(p.plan.algorithm, kind);
    if (!row || row->native() || !row->takes(shape)) continue;
    if (p.plan.algorithm == "f32acc") continue;  // chosen by type (16-bit sums, the wire type), not by speed
    if (p.plan.algorithm == "ring" && ring_us < 0) ring_us = p.predicted_us;
    if (!pick) pick = &p;
    if (!other && p.plan.algorithm != "forest") other = &p;
  }
  if (!pick) return "ring";
  if (pick->plan.algorithm == "forest" && other && other->predicted_us <= pick->predicted_us * 1.05) pick = other;
  if (ring_us >= 0 && ring_us <= pick->predicted_us * 1.05) return "ring";
  return pick->plan.algorithm;
}

const Algorithm* runtime_choice(const topo::NodeSummary& node, int nodes, int ranks_per_node, CollectiveKind kind,
                                size_t bytes, const topo::CostModel& model, uint64_t slice_bytes, const DirectLimits& limits) {
  nodes = std::max(1, nodes);
  const int nranks = nodes * std::max(1, ranks_per_node);
  const bool per_rank = kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter;
  CallShape s;
  s.kind = kind;
  s.bytes = per_rank ? bytes / static_cast<uint64_t>(nranks) : bytes;
  s.nranks = nranks;
  s.node_memory = nodes == 1 && nranks > 1 && limits.one_round > 0;
  s.limits = limits;
  const Chain chain = native_chain(s, nullptr);
  if (chain.size > 0) return chain.rows[0];
  const bool modelled = kind == CollectiveKind::kAllReduce || per_rank;
  if (modelled && nodes > 1)
    if (const Algorithm* a = find_algorithm(choose_algorithm(node, nodes, ranks_per_node, kind, bytes, model, slice_bytes), kind))
      return a;
  return default_algorithm(kind, s.bytes, nranks);
}

std::vector<topo::WeightedTree> planned_forest(const topo::NodeSummary& node, int nodes, int ranks_per_node,
                                               const topo::CostModel& model) {
  const topo::ClusterView view = topo::make_uniform_cluster(node, nodes, ranks_per_node);
  if (view.size() > topo::kForestExactRanks) return {};
  return topo::packed_trees(topo::NetGraph(view, model)).trees;
}

std::vector<int> planned_ring(const topo::NodeSummary& node, int nodes, int ranks_per_node) {
  return topo::base_plan(topo::make_uniform_cluster(node, nodes, ranks_per_node)).rings.at(0);
}

}  // namespace weft
