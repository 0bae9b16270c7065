#pragma once
#include <string>
#include <vector>

#include "collectives/collective.h"

namespace weft {
struct PlanInput;
struct Prediction;
// The shared-memory direct path's native rows (direct.cc): one round ("direct"), all-reduce in
// pieces ("pieces"), all-reduce over weftMemAlloc windows ("window"); eligibility and predictions.
bool direct_eligible(const CallShape& s);
bool pieces_eligible(const CallShape& s);
bool window_eligible(const CallShape& s);
bool predict_direct(const PlanInput& in, Prediction& out);
bool predict_pieces(const PlanInput& in, Prediction& out);
bool predict_window(const PlanInput& in, Prediction& out);
// Point-to-point: one message to or from args.root.
Schedule build_p2p_schedule(const CollectiveArgs& a, int rank, int nranks);
// Dissemination barrier: ceil(log2 n) rounds; in round k rank r signals r+2^k and waits for r-2^k.
void build_dissemination_barrier(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
// All-reduce: double binary tree (tree_allreduce.cc), recursive halving-doubling (rhd_allreduce.cc).
void build_tree_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
void build_rhd_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
// All-reduce with float32 sums of 16-bit pieces, rounded once (f32acc_allreduce.cc; AlgoOptions::wire).
void build_f32acc_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
// Hierarchical all-reduce (hier_allreduce.cc): intra-node reduce-scatter, inter-node rails,
// intra-node all-gather; the flat ring when opt.node_of_rank does not give >= 2 equal nodes of >= 2.
void build_hier_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
// The ranks of every node, in node-id order, each node's in rank order (node_of_rank: the node id
// of every rank). `why` is empty when there are at least two nodes with equal numbers of ranks
// (the layout a hierarchical schedule needs), else says why not; `nodes` is filled whenever
// every rank has a node. Both the host hierarchical schedules and the device hierarchical path
// (runtime/transport/nccl/hier_plan.h) take their layout from here.
struct NodeLayout {
  std::vector<std::vector<int>> nodes;
  std::string why;
};
NodeLayout node_layout(const std::vector<int>& node_of_rank, int nranks);
// Per node (in node-id order) its ranks, or empty when hier falls back to the ring (node_layout
// does not suit, or a node holds one rank).
std::vector<std::vector<int>> hier_layout(const std::vector<int>& node_of_rank, int nranks);
// Where `rank` stands in hier_layout: node index K and local index l (nodes[K][l] == rank);
// nodes empty when the layout does not suit.
struct HierPosition {
  std::vector<std::vector<int>> nodes;
  int node = 0, local = 0;
  int num_nodes() const { return static_cast<int>(nodes.size()); }
  int local_size() const { return nodes.empty() ? 0 : static_cast<int>(nodes.front().size()); }
};
HierPosition hier_position(const std::vector<int>& node_of_rank, int nranks, int rank);
// Hierarchical all-gather (rails, then inside each node) and reduce-scatter (inside each node,
// then rails): hier_gather_scatter.cc. The flat ring where hier_layout does not suit.
void build_hier_allgather(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
void build_hier_reducescatter(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
// Packed spanning trees (forest.cc): every root's shard down (all-gather) and/or up (reduce-scatter)
// its trees, AlgoOptions::forest (else the nodes' chain both ways).
void build_forest_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
void build_forest_reducescatter(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
void build_forest_allgather(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
void build_ring_reducescatter(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
void build_ring_allgather(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
void build_chain_broadcast(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
void build_binomial_broadcast(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
void build_chain_reduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
void build_binomial_reduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
void build_pairwise_alltoall(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
void build_pairwise_alltoallv(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
}  // namespace weft
