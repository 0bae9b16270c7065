// The planner: every algorithm of the table that has a `predict` gives a plan with its predicted
// time (rank_plans); the automatic choice (choose_algorithm) maps that ranking onto the algorithms
// that Weft runs. Topology supplies the data (ClusterView, base_plan, CostModel, flows.h); the
// formulas live next to each algorithm's schedule (collectives/algorithms/*.cc).
#pragma once
#include <string>
#include <vector>

#include <fmt/format.h>

#include "collectives/collective.h"
#include "topology/cluster.h"
#include "topology/cost.h"
#include "topology/flows.h"
#include "topology/netgraph.h"
#include "topology/plan.h"

namespace weft {

// What a prediction looks at.
struct PlanInput {
  const topo::ClusterView& view;
  const topo::CostModel& model;
  const topo::Plan& base;        // rings, rails, trees and levels (topo::base_plan)
  CollectiveKind coll = CollectiveKind::kAllReduce;
  double bytes = 0;
  double slice_bytes = static_cast<double>(kDefaultSliceBytes);  // the schedules' slice (WEFT_SLICE_BYTES)
  // The job's network as a graph (topology/netgraph.h): the links between nodes where the fabric
  // is more than one switch (leaves, a mesh), and what the packed spanning trees pack over.
  const topo::NetGraph* net = nullptr;
};

// An algorithm's predicted time: latency terms plus the slower of its data transfer and, where
// ranks outnumber a machine's cores, the waits for a core of the `steps` steps on its critical
// path (the planner adds that term).
struct Prediction {
  double xfer_us = 0;
  double lat_us = 0;
  topo::Bottleneck b;
  std::vector<std::string> reasons;
  double steps = 0;
};

// Every modelled algorithm's plan with its predicted time, fastest first. `slice_bytes`: the
// schedules' slice size (0: kDefaultSliceBytes).
std::vector<topo::PlanCandidate> rank_plans(const topo::ClusterView& view, CollectiveKind coll, size_t bytes);
std::vector<topo::PlanCandidate> rank_plans(const topo::ClusterView& view, CollectiveKind coll, size_t bytes,
                                            const topo::CostModel& model, uint64_t slice_bytes = 0);

// What the runtime would run (WEFT_ALGO unset) for `bytes` (the planner's size: the whole buffer
// for all-gather and reduce-scatter) on nodes x ranks_per_node ranks of this node type: the first
// native row whose eligibility takes it (one node over Weft's shared memory, with `limits`; no
// weftMemAlloc windows), else the schedule row the communicator picks (AlgorithmChoice): the cost
// model's across nodes for all-reduce, reduce-scatter and all-gather, else the measured
// crossovers. weft-topo plan and weft-sim print it.
const Algorithm* runtime_choice(const topo::NodeSummary& node, int nodes, int ranks_per_node, CollectiveKind kind,
                                size_t bytes, const topo::CostModel& model, uint64_t slice_bytes, const DirectLimits& limits);

// The cost model's choice for `coll` of `bytes` on `nodes` x `ranks_per_node` ranks of this node
// type (a uniform cluster), as an algorithm table id. Both the communicator (when WEFT_ALGO is
// unset and there is more than one node) and `weft-topo plan` use it.
std::string choose_algorithm(const topo::NodeSummary& node, int nodes, int ranks_per_node, CollectiveKind coll,
                             size_t bytes, const topo::CostModel& model, uint64_t slice_bytes = 0);

// The flat ring that the planner explains (topo::base_plan's rings[0], ring position -> rank) for
// `nodes` x `ranks_per_node` ranks of this node type: pass it as AlgoOptions::ring so that the
// ring schedules run the ring that was planned.
std::vector<int> planned_ring(const topo::NodeSummary& node, int nodes, int ranks_per_node);

// Predictions of the algorithms in the table (false: this algorithm has no model for in.coll or
// for this cluster). The ring's serves the ring all-reduce, reduce-scatter and all-gather rows.
bool predict_ring(const PlanInput& in, Prediction& out);
bool predict_tree(const PlanInput& in, Prediction& out);
bool predict_rhd(const PlanInput& in, Prediction& out);
bool predict_hier(const PlanInput& in, Prediction& out);
bool predict_forest(const PlanInput& in, Prediction& out);
// The packed trees are packed up to topo::kForestExactRanks ranks only: above, the prediction is
// the cut bound itself (shown, never chosen; a forced forest runs the nodes' chains).
bool forest_eligible(const CallShape& s);
bool predict_f32acc(const PlanInput& in, Prediction& out);

// The packed spanning trees the planner explains (topo::packed_trees over the network of
// `nodes` x `ranks_per_node` ranks of this node type and the model's fabric; ranks numbered as in
// planned_ring): pass them as AlgoOptions::forest. Empty above topo::kForestExactRanks ranks.
std::vector<topo::WeightedTree> planned_forest(const topo::NodeSummary& node, int nodes, int ranks_per_node,
                                               const topo::CostModel& model);

}  // namespace weft
