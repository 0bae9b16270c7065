// Communication plans: intra-node rings, NIC rails, double binary trees over the ranks, hierarchy
// levels, and candidate algorithms ranked by the cost model's predicted time.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/cluster.h"
#include "topology/cost.h"
#include "topology/trees.h"

namespace weft::topo {

enum class Collective : uint8_t { kAllReduce = 0, kReduceScatter = 1, kAllGather = 2, kBroadcast = 3, kReduce = 4 };
const char* collective_name(Collective c);  // "allreduce", "reducescatter", ...
std::optional<Collective> parse_collective(std::string_view name);

enum class Algorithm : uint8_t { kRing = 0, kDoubleBinaryTree = 1, kHalvingDoubling = 2, kHierarchical = 3 };
const char* algorithm_name(Algorithm a);  // "ring", "double_binary_tree", "halving_doubling", "hierarchical"

// Inter-node rail: local rank `index` of every node, each with its NIC.
struct Rail {
  int index = 0;
  std::vector<int> ranks;          // global ranks, one per node (node order) = the rail's ring
  std::vector<std::string> nics;   // per entry of ranks ("" when none)
};

// Ranks that communicate together at one level of the hierarchical algorithm.
struct Level {
  std::string name;                       // "intra-node", "inter-node"
  std::vector<std::vector<int>> groups;   // global ranks per group
};

struct Plan {
  Algorithm algorithm = Algorithm::kRing;
  Collective collective = Collective::kAllReduce;
  size_t bytes = 0;
  std::vector<std::vector<int>> rings;  // ring orders over global ranks (flat ring; per-node rings)
  std::vector<Rail> rails;
  std::vector<Tree> trees;              // the double binary tree, over ranks (in node order)
  std::vector<Level> levels;
  double predicted_us = 0;
  double bottleneck_gbs = 0;
  double alpha_us = 0;                  // per-step latency used
  std::vector<std::string> reasons;     // how the choice and the prediction were made
  std::string explain() const;
};

struct PlanCandidate {
  Plan plan;
  double predicted_us = 0;
};

// Best ring over the ranks of one node (global ranks), from their bound devices' path classes.
std::vector<int> intra_node_ring(const ClusterView& view, int node);
std::vector<Rail> build_rails(const ClusterView& view);
// Rings, rails, trees and levels, without an algorithm-specific prediction.
Plan base_plan(const ClusterView& view);

// Every algorithm's plan with its predicted time, fastest first.
std::vector<PlanCandidate> rank_plans(const ClusterView& view, Collective coll, size_t bytes);
std::vector<PlanCandidate> rank_plans(const ClusterView& view, Collective coll, size_t bytes, const CostModel& model);

// The Weft algorithm (WEFT_ALGO id) that carries out a plan's algorithm: "ring", "tree", "rhd", "hier".
const char* weft_algorithm_id(Algorithm a);
// The cost model's choice for `coll` of `bytes` on `nodes` x `ranks_per_node` ranks of this node
// type (a uniform cluster), as a Weft algorithm id. Both the communicator (when WEFT_ALGO is unset
// and there is more than one node) and `weft-topo plan` use it.
std::string choose_weft_algorithm(const NodeSummary& node, int nodes, int ranks_per_node, Collective coll, size_t bytes,
                                  const CostModel& model);

}  // namespace weft::topo
