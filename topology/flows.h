// Flow and stage helpers of the cost model: the link a pair of ranks uses, the bottleneck of a
// ring, the time of a stage of simultaneous flows, the stages of halving-doubling. The
// algorithms' predictions (collectives/algorithms/*.cc, `predict` in the algorithm table) are
// written with these.
#pragma once
#include <vector>

#include "topology/cluster.h"
#include "topology/cost.h"
#include "topology/trees.h"

namespace weft::topo {

class NetGraph;  // netgraph.h

// The path between two ranks of one node (their bound devices).
Path intra_path(const ClusterView& v, int a, int b);
// Ranks of `rank`'s node that share its NIC (>= 1).
int nic_sharing(const ClusterView& v, int rank);
// A rank's network edge (its NIC, capped by the GPU-NIC PCIe path); `shared`: divided among the
// ranks that use the NIC at once.
LinkCost net_edge(const ClusterView& v, const CostModel& m, int rank, bool shared);
// The link between two ranks: intra-node path, or the slower of the two network edges.
LinkCost rank_edge(const ClusterView& v, const CostModel& m, int a, int b, bool shared_net);

struct Bottleneck {
  double gbs = 0;
  double alpha = 0;
  void add(const LinkCost& c) {
    gbs = gbs <= 0 ? c.gbs : std::min(gbs, c.gbs);
    alpha = std::max(alpha, c.alpha_us);
  }
};

// The slowest hop and the largest latency around a ring (ring[i] -> ring[i + 1]).
Bottleneck ring_bottleneck(const ClusterView& v, const CostModel& m, const std::vector<int>& ring, bool shared);

// Bytes moving at the same time from one rank to another (one stage of a schedule).
struct Flow {
  int from = 0, to = 0;
  double bytes = 0;
};

// The time of a stage whose flows all run at once: each node's NIC carries the sum of its ranks'
// flows to other nodes (each direction on its own), each rank sends its flows inside the node one
// after the other; the slowest of these sets the time. `b` collects the links used.
struct StageCost {
  double us = 0;            // transfer time of the busiest NIC or rank
  double nic_bytes = 0;     // bytes through the busiest NIC (one direction)
  Bottleneck b;
};
// With a graph of a fabric that is more than one switch (CostModel::fabric: leaves, a mesh) the
// flows between nodes are charged to the graph's links instead (a mesh has no NICs).
StageCost stage_cost(const ClusterView& v, const CostModel& m, const std::vector<Flow>& flows,
                     const NetGraph* graph = nullptr);
// The slowest of a set of flows that run at once, as a link: bandwidth = bytes of one flow over the
// time they take together on the graph (flows of equal size), alpha = the largest route latency.
Bottleneck graph_bottleneck(const NetGraph& g, const std::vector<Flow>& flows);

// The ranks node by node, each node's in ascending order: the order in which Weft's tree and
// halving-doubling schedules place the ranks (collectives/algorithms/slicing.h, node_order, is
// the same order computed from AlgoOptions::node_of_rank).
std::vector<int> node_ordered_ranks(const ClusterView& v);
// The double binary tree over the ranks in node order, with ranks as vertices.
std::vector<Tree> rank_trees(const ClusterView& v);
// The stages of recursive halving-doubling on S bytes over the ranks in node order: the fold of
// the ranks beyond the largest power of two, halving at distances 1, 2, 4, ..., doubling in
// reverse, the unfold. A reduce-scatter runs the halving half only, an all-gather the doubling half.
std::vector<std::vector<Flow>> rhd_stages(const ClusterView& v, double S, bool halving, bool doubling);

}  // namespace weft::topo
