#include "topology/plan.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "runtime/base/error.h"
#include "topology/ring.h"

namespace weft::topo {

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "allreduce";
    case Collective::kReduceScatter: return "reducescatter";
    case Collective::kAllGather: return "allgather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
  }
  return "?";
}

std::optional<Collective> parse_collective(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(Collective::kReduce); ++i)
    if (name == collective_name(static_cast<Collective>(i))) return static_cast<Collective>(i);
  return std::nullopt;
}

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kRing: return "ring";
    case Algorithm::kDoubleBinaryTree: return "double_binary_tree";
    case Algorithm::kHalvingDoubling: return "halving_doubling";
    case Algorithm::kHierarchical: return "hierarchical";
  }
  return "?";
}

const char* weft_algorithm_id(Algorithm a) {
  switch (a) {
    case Algorithm::kRing: return "ring";
    case Algorithm::kDoubleBinaryTree: return "tree";
    case Algorithm::kHalvingDoubling: return "rhd";
    case Algorithm::kHierarchical: return "hier";
  }
  return "ring";
}

namespace {

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

struct Bottleneck {
  double gbs = 0;
  double alpha = 0;
  void add(const LinkCost& c) {
    gbs = gbs <= 0 ? c.gbs : std::min(gbs, c.gbs);
    alpha = std::max(alpha, c.alpha_us);
  }
};

Bottleneck ring_bottleneck(const ClusterView& v, const CostModel& m, const std::vector<int>& ring, bool shared) {
  Bottleneck b;
  const size_t n = ring.size();
  for (size_t i = 0; n > 1 && i < n; ++i) b.add(rank_edge(v, m, ring[i], ring[(i + 1) % n], shared));
  return b;
}

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

StageCost stage_cost(const ClusterView& v, const CostModel& m, const std::vector<Flow>& flows) {
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
  return c;
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

std::string ranks_text(const std::vector<int>& r) {
  std::string s;
  for (int x : r) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

}  // namespace

std::vector<int> intra_node_ring(const ClusterView& view, int node) {
  const auto& ranks = view.ranks_of_node.at(node);
  const size_t n = ranks.size();
  std::vector<std::vector<double>> w(n, std::vector<double>(n, 0));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (i != j) w[i][j] = ring_edge_weight(intra_path(view, ranks[i], ranks[j]));
  std::vector<int> out;
  for (int i : best_ring(w).order) out.push_back(ranks[i]);
  return out;
}

std::vector<Rail> build_rails(const ClusterView& view) {
  std::vector<Rail> rails(view.max_ranks_per_node());
  for (size_t l = 0; l < rails.size(); ++l) {
    rails[l].index = static_cast<int>(l);
    for (const auto& ranks : view.ranks_of_node)
      if (l < ranks.size()) {
        rails[l].ranks.push_back(ranks[l]);
        rails[l].nics.push_back(view.bindings[ranks[l]].nic);
      }
  }
  return rails;
}

Plan base_plan(const ClusterView& view) {
  require(view.size() >= 1, "plan: empty cluster");
  Plan p;
  std::vector<int> flat;
  Level intra{"intra-node", {}};
  for (int n = 0; n < view.num_nodes(); ++n) {
    auto ring = intra_node_ring(view, n);
    flat.insert(flat.end(), ring.begin(), ring.end());
    intra.groups.push_back(ring);
  }
  p.rings.push_back(flat);
  for (const auto& g : intra.groups) p.rings.push_back(g);
  p.rails = build_rails(view);
  p.trees = rank_trees(view);
  Level inter{"inter-node", {}};
  for (const auto& r : p.rails) inter.groups.push_back(r.ranks);
  p.levels = {intra, inter};
  return p;
}

std::vector<PlanCandidate> rank_plans(const ClusterView& view, Collective coll, size_t bytes) {
  return rank_plans(view, coll, bytes, CostModel::from_env());
}

std::vector<PlanCandidate> rank_plans(const ClusterView& view, Collective coll, size_t bytes, const CostModel& m) {
  const Plan base = base_plan(view);
  const double S = static_cast<double>(bytes);
  const int p = view.size(), N = view.num_nodes(), R = view.max_ranks_per_node();
  const bool allreduce = coll == Collective::kAllReduce;
  const bool rooted = coll == Collective::kBroadcast || coll == Collective::kReduce;
  std::vector<PlanCandidate> out;
  // Weft's schedules cut every block into slices of at most kSliceBytes, one message each.
  const double kSliceBytes = 512.0 * 1024;
  // An algorithm's time: its latency terms plus the slower of its data transfer and, where ranks
  // outnumber a machine's cores, the waits for a core of the `steps` steps on its critical path
  // (HostCpu; the link moves data while a rank waits; with ranks <= cores the wait is 0).
  const double wait = host_wait_us(m.host, p);
  auto add = [&](Algorithm a, double xfer, double lat, const Bottleneck& b, std::vector<std::string> why,
                 double steps) {
    double us = lat + xfer;
    if (const double cpu = steps * wait; cpu > 0) {
      us = lat + std::max(xfer, cpu);
      why.push_back(fmt::format("{} ranks share {} cores: each of the {:.0f} steps in sequence waits {:.0f} us for a core, "
                                "{:.0f} us in all{}",
                                m.host.ranks, m.host.cores, steps, wait, cpu,
                                cpu > xfer ? ", more than the transfer: the CPU sets the time" : ", hidden by the transfer"));
    }
    Plan plan = base;
    plan.algorithm = a;
    plan.collective = coll;
    plan.bytes = bytes;
    plan.predicted_us = p > 1 ? us : 0.0;
    plan.bottleneck_gbs = b.gbs;
    plan.alpha_us = b.alpha;
    plan.reasons = std::move(why);
    out.push_back({std::move(plan), p > 1 ? us : 0.0});
  };

  // Flat ring through every node's best intra-node ring.
  {
    Bottleneck b = ring_bottleneck(view, m, base.rings[0], false);
    double xfer, lat;
    if (allreduce) xfer = 2.0 * (p - 1) / p * transfer_us(S, b.gbs), lat = 2.0 * (p - 1) * b.alpha;
    else if (rooted) xfer = transfer_us(S, b.gbs), lat = (p - 1) * b.alpha;
    else xfer = 1.0 * (p - 1) / p * transfer_us(S, b.gbs), lat = (p - 1) * b.alpha;
    add(Algorithm::kRing, xfer, lat, b,
        {fmt::format("flat ring over {} ranks; slowest hop {:.1f} GB/s, {:.1f} us per step", p, b.gbs, b.alpha),
         "intra-node order minimises SYS, then NODE/PHB, then PXB crossings (NVLink neighbours first)"},
        allreduce ? 2.0 * (p - 1) : p - 1.0);
  }
  // Double binary tree over the ranks in node order (tree_allreduce.cc): half the buffer up and
  // down each tree, every slice pipelined, so each link carries its edges' bytes at once and the
  // busiest NIC sets the pace once the pipeline is full.
  if (allreduce || rooted) {
    const double half = S / 2;
    std::vector<Flow> flows;
    int depth = 0;
    for (const Tree& t : base.trees) {
      depth = std::max(depth, t.depth());
      for (int r = 0; r < p; ++r) {
        if (t.parent[r] < 0) continue;
        if (allreduce || coll == Collective::kReduce) flows.push_back({r, t.parent[r], half});
        if (allreduce || coll == Collective::kBroadcast) flows.push_back({t.parent[r], r, half});
      }
    }
    StageCost c = stage_cost(view, m, flows);
    if (c.b.gbs <= 0) c.b.add(m.edge(Path{PathClass::kSelf, Fabric::kNone, 0, 0}));
    // A pipeline of k slices per half (slices of kSliceBytes / kTreeWindowSlices): k - 1 slices
    // at the busiest NIC's pace, plus one slice's trip along the slowest root-to-leaf path (up,
    // then down again for the all-reduce). With one slice that trip is the whole time: each hop
    // waits for the previous one. The window (kTreeWindowSlices slices in flight per tree, trees.h)
    // caps the pace at a window per round trip of a slice, hop latencies included.
    const double k = std::max(1.0, std::ceil(half / (kSliceBytes / kTreeWindowSlices))), slice = half / k;
    double path = 0, path_alpha = 0;
    for (const Tree& t : base.trees)
      for (int r = 0; r < p; ++r) {
        double us = 0, alpha = 0;
        for (int u = r; t.parent[u] >= 0; u = t.parent[u]) {
          const LinkCost e = rank_edge(view, m, u, t.parent[u], false);
          us += transfer_us(slice, e.gbs);
          alpha += e.alpha_us;
        }
        path = std::max(path, us);
        path_alpha = std::max(path_alpha, alpha);
      }
    const int trips = allreduce ? 2 : 1;
    const double windowed = allreduce ? k / kTreeWindowSlices * 2 * (path + path_alpha) : 0;
    const double xfer = std::max({c.us, (k - 1) / k * c.us + trips * path, windowed}), lat = trips * depth * c.b.alpha;
    int crossing = 0;
    for (const Flow& f : flows) crossing += view.node_of_rank[f.from] != view.node_of_rank[f.to];
    add(Algorithm::kDoubleBinaryTree, xfer, lat, c.b,
        {fmt::format("two complementary binary trees over {} ranks in node order (depth {}), half the data each", p, depth),
         fmt::format("{} of their {} edge directions cross between nodes; the busiest NIC carries {:.2f}x the buffer each way",
                     crossing, flows.size(), S > 0 ? c.nic_bytes / S : 0.0),
         windowed > c.us * 1.0001 && windowed >= xfer
             ? fmt::format("{:.0f} slices per half, {} in flight per tree: the window's round trip ({:.0f} us) sets the time, "
                           "not the NIC", k, kTreeWindowSlices, 2 * (path + path_alpha))
         : xfer > c.us * 1.0001
             ? fmt::format("{:.0f} slice{} per half: a slice's trip {} the deepest path ({:.0f} us) sets the time, not the NIC",
                           k, k == 1 ? "" : "s", allreduce ? "up and down" : "along", trips * path)
             : std::string("latency grows with log2(ranks) instead of ranks")},
        trips * depth);
  }
  // Recursive halving-doubling over the ranks in node order (rhd_allreduce.cc): stages one after
  // the other, each as slow as its busiest NIC or rank.
  {
    const auto stages = rhd_stages(view, S, coll != Collective::kAllGather, coll != Collective::kReduceScatter);
    double xfer = 0, lat = 0, busiest = 0;
    Bottleneck b;
    for (const auto& st : stages) {
      StageCost c = stage_cost(view, m, st);
      xfer += c.us;
      lat += c.b.alpha;
      busiest += c.nic_bytes;
      if (c.b.gbs > 0) b.add({c.b.alpha, c.b.gbs});
    }
    if (b.gbs <= 0) b.add(m.edge(Path{PathClass::kSelf, Fabric::kNone, 0, 0}));
    int p2 = 1;
    while (p2 * 2 <= p) p2 *= 2;
    const int extra = p - p2;
    add(Algorithm::kHalvingDoubling, xfer, lat, b,
        {fmt::format("{} stages over {} ranks in node order{}; distances 1, 2, 4, ...: the largest halves stay inside nodes",
                     stages.size(), p2, extra > 0 ? fmt::format(" plus a fold-in of {} extra ranks", extra) : std::string()),
         fmt::format("the busiest NIC of each stage carries {:.2f}x the buffer in all", S > 0 ? busiest / S : 0.0)},
        static_cast<double>(stages.size()));
  }
  // Hierarchical: intra reduce-scatter, inter all-reduce per rail, intra all-gather.
  if (N > 1 && R > 1) {
    Bottleneck bi, br;
    for (int n = 0; n < N; ++n) {
      Bottleneck x = ring_bottleneck(view, m, base.levels[0].groups[n], false);
      bi.add({x.alpha, x.gbs});
    }
    for (const auto& rail : base.rails) {
      Bottleneck x = ring_bottleneck(view, m, rail.ranks, true);
      if (x.gbs > 0) br.add({x.alpha, x.gbs});
    }
    const double chunk = S / R;
    // Weft's hierarchical schedules overlap their phases slice by slice (hier_allreduce.cc,
    // hier_gather_scatter.cc): the slowest phase sets the pace and each of the others adds one
    // slice (pipeline fill and drain).
    const double kSlice = 512.0 * 1024;
    auto overlapped = [](const std::vector<double>& phase, const std::vector<double>& slice) {
      const size_t slowest = static_cast<size_t>(std::max_element(phase.begin(), phase.end()) - phase.begin());
      double t = phase[slowest];
      for (size_t i = 0; i < phase.size(); ++i)
        if (i != slowest) t += std::min(slice[i], phase[i]);
      return t;
    };
    double xfer, lat;
    if (allreduce) {
      xfer = overlapped({(R - 1.0) / R * transfer_us(S, bi.gbs), 2.0 * (N - 1) / N * transfer_us(chunk, br.gbs),
                         (R - 1.0) / R * transfer_us(S, bi.gbs)},
                        {transfer_us(std::min(chunk, kSlice), bi.gbs), transfer_us(std::min(chunk / N, kSlice), br.gbs),
                         transfer_us(std::min(chunk, kSlice), bi.gbs)});
      lat = 2.0 * (R - 1) * bi.alpha + 2.0 * (N - 1) * br.alpha;
    } else if (rooted) {
      xfer = (R - 1.0) / R * transfer_us(S, bi.gbs) + transfer_us(chunk, br.gbs);
      lat = (R - 1) * bi.alpha + (N - 1) * br.alpha;
    } else {
      // Reduce-scatter: blocks of each rail summed inside the node, then along the rail;
      // all-gather: the other way round. One rank's block is S / p.
      const double block = S / p;
      xfer = overlapped({(R - 1.0) / R * transfer_us(S, bi.gbs), (N - 1.0) / N * transfer_us(chunk, br.gbs)},
                        {transfer_us(std::min(block, kSlice), bi.gbs), transfer_us(std::min(block, kSlice), br.gbs)});
      lat = (R - 1) * bi.alpha + (N - 1) * br.alpha;
    }
    Bottleneck b = bi;
    b.add({br.alpha, br.gbs});
    std::set<std::string> nics;
    for (const auto& rail : base.rails)
      if (!rail.nics.empty()) nics.insert(rail.nics.front());
    std::string nic_text = nics.size() >= base.rails.size()
                               ? std::string("each rail uses its own NIC (the nearest to its devices), so all NICs work in parallel")
                               : fmt::format("the {} rails share {} NIC{} per node, each getting its share of it", base.rails.size(),
                                             nics.size(), nics.size() == 1 ? "" : "s");
    add(Algorithm::kHierarchical, xfer, lat, b,
        {fmt::format("intra-node ring of {} ranks at {:.3g} GB/s, then {} rails across {} nodes at {:.3g} GB/s each on 1/{} of the data",
                     R, bi.gbs, base.rails.size(), N, br.gbs, R),
         nic_text, "the phases overlap slice by slice: the slowest sets the time"},
        (allreduce ? 2.0 : 1.0) * (R - 1 + N - 1));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const PlanCandidate& a, const PlanCandidate& b) { return a.predicted_us < b.predicted_us; });
  return out;
}

std::string Plan::explain() const {
  std::string s = fmt::format("{} {} of {} bytes: predicted {:.2f} us (bottleneck {:.2f} GB/s, {:.2f} us per step)\n",
                              algorithm_name(algorithm), collective_name(collective), bytes, predicted_us,
                              bottleneck_gbs, alpha_us);
  for (const auto& r : reasons) s += "  - " + r + "\n";
  if (!rings.empty()) s += "  flat ring: " + ranks_text(rings[0]) + "\n";
  for (size_t i = 1; i < rings.size(); ++i) s += fmt::format("  node {} ring: {}\n", i - 1, ranks_text(rings[i]));
  for (const auto& r : rails) {
    std::string nics;
    for (const auto& n : r.nics) nics += (nics.empty() ? "" : " ") + (n.empty() ? std::string("-") : n);
    s += fmt::format("  rail {}: ranks {} via {}\n", r.index, ranks_text(r.ranks), nics);
  }
  for (size_t t = 0; t < trees.size(); ++t) {
    std::string edges;
    for (size_t v = 0; v < trees[t].parent.size(); ++v)
      if (trees[t].parent[v] >= 0) edges += fmt::format(" {}->{}", v, trees[t].parent[v]);
    s += fmt::format("  tree {} (root rank {}, depth {}):{}\n", t, trees[t].root, trees[t].depth(),
                     edges.empty() ? " (single rank)" : edges);
  }
  for (const auto& l : levels) {
    std::string g;
    for (const auto& grp : l.groups) g += " {" + ranks_text(grp) + "}";
    s += fmt::format("  level {}:{}\n", l.name, g);
  }
  return s;
}

}  // namespace weft::topo
