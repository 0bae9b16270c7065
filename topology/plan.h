// Communication plans: intra-node rings, NIC rails, double binary trees over the ranks, hierarchy
// levels, and the record of a candidate algorithm with its predicted time. The candidates
// themselves, their predictions and the automatic choice live with the algorithms
// (collectives/planner.h; each algorithm's `predict` in collectives/algorithms/).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/base/collective_kind.h"
#include "topology/cluster.h"
#include "topology/cost.h"
#include "topology/trees.h"

namespace weft::topo {

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
  std::string algorithm = "ring";       // the algorithm's table id (WEFT_ALGO): "ring", "tree", "rhd", "hier"
  std::string name;                     // its human name ("double_binary_tree"); empty: the id
  CollectiveKind collective = CollectiveKind::kAllReduce;
  size_t bytes = 0;
  std::vector<std::vector<int>> rings;  // ring orders over global ranks (flat ring; per-node rings)
  std::vector<Rail> rails;
  std::vector<Tree> trees;              // the double binary tree, over ranks (in node order)
  std::vector<Level> levels;
  double predicted_us = 0;
  double ideal_us = 0;                  // the worst cut's bound on the transfer (forest.h; all-reduce: twice, RS + AG)
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

}  // namespace weft::topo
