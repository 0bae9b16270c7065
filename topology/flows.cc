// Flow and stage helpers of the cost model (flows.h).
#include "topology/flows.h"

#include "topology/netgraph.h"

#include <algorithm>
#include <map>
#include <string>

namespace weft::topo {

Path intra_path(const ClusterView& v, int a, int b) {
  const NodeSummary& s = v.node_summary_of(a);
  const Binding& ba = v.bindings[a];
  const Binding& bb = v.bindings[b];
  if (ba.gpu >= 0 && bb.gpu >= 0) return s.gpu_gpu(ba.gpu, bb.gpu);
  const bool same = ba.numa < 0 || bb.numa < 0 || ba.numa == bb.numa;
  return Path{same ? PathClass::kSelf : PathClass::kSYS, Fabric::kNone, 0, 0};
}

int nic_sharing(const ClusterView& v, int rank) {
  int c = 0;
  for (int r : v.ranks_of_node[v.node_of_rank[rank]])
    if (v.bindings[r].nic == v.bindings[rank].nic) ++c;
  return std::max(1, c);
}

LinkCost net_edge(const ClusterView& v, const CostModel& m, int rank, bool shared) {
  const NodeSummary& s = v.node_summary_of(rank);
  const Binding& b = v.bindings[rank];
  const int k = s.nic_index(b.nic);
  LinkCost c = m.network(k >= 0 ? s.nics[k].gbs : 0, shared ? nic_sharing(v, rank) : 1);
  if (b.gpu >= 0 && k >= 0) {
    LinkCost pcie = m.edge(s.gpu_nic(b.gpu, k));  // GPUDirect traffic crosses this PCIe path
    if (pcie.gbs > 0) c.gbs = std::min(c.gbs, pcie.gbs);
  }
  return c;
}

LinkCost rank_edge(const ClusterView& v, const CostModel& m, int a, int b, bool shared_net) {
  if (v.node_of_rank[a] == v.node_of_rank[b]) return m.edge(intra_path(v, a, b));
  LinkCost x = net_edge(v, m, a, shared_net), y = net_edge(v, m, b, shared_net);
  return {std::max(x.alpha_us, y.alpha_us), std::min(x.gbs, y.gbs)};
}


Bottleneck ring_bottleneck(const ClusterView& v, const CostModel& m, const std::vector<int>& ring, bool shared) {
  Bottleneck b;
  const size_t n = ring.size();
  for (size_t i = 0; n > 1 && i < n; ++i) b.add(rank_edge(v, m, ring[i], ring[(i + 1) % n], shared));
  return b;
}

// Bytes moving at the same time from one rank to another (one stage of a schedule).

// The time of a stage whose flows all run at once: each node's NIC carries the sum of its ranks'
// flows to other nodes (each direction on its own), each rank sends its flows inside the node one
// after the other; the slowest of these sets the time. `b` collects the links used.

StageCost stage_cost(const ClusterView& v, const CostModel& m, const std::vector<Flow>& flows, const NetGraph* graph) {
  const bool fabric = graph && m.fabric.active();
  std::vector<Flow> between;
  struct Nic {
    double out = 0, in = 0;
    LinkCost cost;
  };
  std::map<std::pair<int, std::string>, Nic> nics;
  std::vector<double> intra_us(v.size(), 0.0);
  StageCost c;
  for (const Flow& f : flows) {
    if (f.bytes <= 0 || f.from == f.to) continue;
    if (v.node_of_rank[f.from] == v.node_of_rank[f.to]) {
      const LinkCost e = rank_edge(v, m, f.from, f.to, false);
      intra_us[f.from] += transfer_us(f.bytes, e.gbs);
      c.b.add(e);
      continue;
    }
    if (fabric) between.push_back(f);
    if (fabric && m.fabric.mesh()) continue;  // no NICs: the graph's links below
    for (int side = 0; side < 2; ++side) {
      const int r = side == 0 ? f.from : f.to;
      Nic& n = nics[{v.node_of_rank[r], v.bindings[r].nic}];
      n.cost = net_edge(v, m, r, false);
      (side == 0 ? n.out : n.in) += f.bytes;
      c.b.add(n.cost);
    }
  }
  for (double us : intra_us) c.us = std::max(c.us, us);
  for (const auto& [key, n] : nics) {
    c.us = std::max(c.us, transfer_us(std::max(n.out, n.in), n.cost.gbs));
    c.nic_bytes = std::max(c.nic_bytes, std::max(n.out, n.in));
  }
  if (!between.empty()) {
    int busiest = -1;
    c.us = std::max(c.us, flows_time_us(*graph, between, &busiest));
    if (busiest >= 0) c.b.add({m.net.alpha_us, graph->edges()[busiest].gbs});
  }
  return c;
}

Bottleneck graph_bottleneck(const NetGraph& g, const std::vector<Flow>& flows) {
  Bottleneck b;
  double bytes = 0;
  for (const Flow& f : flows) {
    bytes = std::max(bytes, f.bytes);
    b.alpha = std::max(b.alpha, g.alpha_us(f.from, f.to));
  }
  const double us = flows_time_us(g, flows);
  b.gbs = us > 0 ? bytes / (us * 1e3) : 0;
  return b;
}

// The ranks node by node, each node's in ascending order: the order in which Weft's tree and
// halving-doubling schedules place the ranks (collectives/algorithms/slicing.h, node_order).
std::vector<int> node_ordered_ranks(const ClusterView& v) {
  std::vector<int> order;
  for (const auto& ranks : v.ranks_of_node) order.insert(order.end(), ranks.begin(), ranks.end());
  return order;
}

// The double binary tree over the ranks in node order (as tree_allreduce.cc builds it), with
// ranks as vertices.
std::vector<Tree> rank_trees(const ClusterView& v) {
  const std::vector<int> order = node_ordered_ranks(v);
  std::vector<Tree> out;
  for (const Tree& t : double_binary_trees(static_cast<int>(order.size()))) out.push_back(relabel(t, order));
  return out;
}

// The stages of recursive halving-doubling (rhd_allreduce.cc) on S bytes: the fold of the ranks
// beyond the largest power of two, halving at distances 1, 2, 4, ... (each pair swaps half of
// its current range), doubling at the same distances in reverse, the unfold. A reduce-scatter
// runs the halving half only, an all-gather the doubling half.
std::vector<std::vector<Flow>> rhd_stages(const ClusterView& v, double S, bool halving, bool doubling) {
  const std::vector<int> order = node_ordered_ranks(v);
  const int n = static_cast<int>(order.size());
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  auto real = [&](int q) { return order[q < rem ? 2 * q + 1 : q + rem]; };
  std::vector<std::vector<Flow>> stages;
  std::vector<Flow> fold, unfold;
  for (int i = 0; i < rem; ++i) {
    fold.push_back({order[2 * i], order[2 * i + 1], S});
    unfold.push_back({order[2 * i + 1], order[2 * i], S});
  }
  if (halving && !fold.empty()) stages.push_back(fold);
  std::vector<std::vector<Flow>> halves;
  for (int m = 1, width = p; m < p; m *= 2, width /= 2) {
    std::vector<Flow> st;
    for (int q = 0; q < p; ++q) st.push_back({real(q), real(q ^ m), S * (width / 2) / p});
    halves.push_back(std::move(st));
  }
  if (halving) stages.insert(stages.end(), halves.begin(), halves.end());
  if (doubling) stages.insert(stages.end(), halves.rbegin(), halves.rend());
  if (doubling && !unfold.empty()) stages.push_back(unfold);
  return stages;
}


}  // namespace weft::topo
