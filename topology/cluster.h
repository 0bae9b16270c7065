// ClusterView: every rank's node and devices, built from one (node key, NodeSummary, Binding) per
// rank (build_cluster_view; the ranks' records travel as encode_rank_info's JSON).
#pragma once
#include <string>
#include <vector>

#include "runtime/base/bytes.h"
#include "topology/summary.h"

namespace weft::topo {

struct RankInfo {
  std::string node_key;  // hostname, or WEFT_NODE_ID when set
  NodeSummary summary;
  Binding binding;
};

struct ClusterView {
  std::vector<std::string> node_keys;     // per node, in order of each node's first rank
  std::vector<NodeSummary> nodes;         // per node (the summary of its first rank)
  std::vector<std::vector<int>> ranks_of_node;  // global ranks per node, ascending
  std::vector<int> node_of_rank;          // per rank
  std::vector<int> local_rank;            // per rank: index within its node
  std::vector<Binding> bindings;          // per rank

  int size() const { return static_cast<int>(node_of_rank.size()); }
  int num_nodes() const { return static_cast<int>(nodes.size()); }
  int ranks_on_node(int node) const { return static_cast<int>(ranks_of_node.at(node).size()); }
  int max_ranks_per_node() const;
  // Every node holds the same number of ranks.
  bool uniform() const;
  const NodeSummary& node_summary_of(int rank) const { return nodes.at(node_of_rank.at(rank)); }
};

ClusterView build_cluster_view(std::vector<RankInfo> ranks);

// nodes x ranks_per_node ranks on identical nodes, with default_bindings(); for weft-topo plan and
// tests.
ClusterView make_uniform_cluster(const NodeSummary& node, int nodes, int ranks_per_node,
                                 const std::string& key_prefix = "node");

// WEFT_NODE_ID when set and non-empty, else the summary's hostname, else gethostname().
std::string local_node_key(const NodeSummary& s);

// Wire format of one RankInfo (JSON text).
Bytes encode_rank_info(const RankInfo& info);
RankInfo decode_rank_info(const Bytes& bytes);

}  // namespace weft::topo
