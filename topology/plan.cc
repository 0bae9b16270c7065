#include "topology/plan.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "runtime/error.h"
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

int Tree::depth() const {
  int best = 0;
  for (size_t v = 0; v < parent.size(); ++v) {
    int d = 0;
    for (int u = static_cast<int>(v); parent[u] >= 0 && d <= static_cast<int>(parent.size()); u = parent[u]) ++d;
    best = std::max(best, d);
  }
  return best;
}

void binary_tree_links(int n, int v, int* parent, int* child0, int* child1) {
  int bit = 1;
  while (bit < n && !(bit & v)) bit <<= 1;
  if (v == 0) {
    *parent = -1;
    *child0 = -1;
    *child1 = n > 1 ? bit >> 1 : -1;
    return;
  }
  int up = (v ^ bit) | (bit << 1);
  if (up >= n) up = v ^ bit;
  *parent = up;
  int low = bit >> 1;
  *child0 = low == 0 ? -1 : v - low;
  int c1 = low == 0 ? -1 : v + low;
  while (c1 >= n) {
    low >>= 1;
    c1 = low == 0 ? -1 : v + low;
  }
  *child1 = c1;
}

namespace {

Tree tree_from_parents(std::vector<int> parent) {
  Tree t;
  const int n = static_cast<int>(parent.size());
  t.children.assign(n, {});
  for (int v = 0; v < n; ++v) {
    if (parent[v] < 0) t.root = v;
    else t.children[parent[v]].push_back(v);
  }
  for (auto& c : t.children) std::sort(c.begin(), c.end());
  t.parent = std::move(parent);
  return t;
}

// Full binary tree over [lo, hi] (even ends) whose in-order sequence is lo..hi: odd vertices are
// interior, even ones leaves. Returns the subtree root.
int full_inorder(int lo, int hi, std::vector<int>& parent) {
  if (lo == hi) return lo;
  int mid = (lo + hi) / 2;
  if (mid % 2 == 0) mid += 1;
  if (mid >= hi) mid -= 2;
  const int l = full_inorder(lo, mid - 1, parent);
  const int r = full_inorder(mid + 1, hi, parent);
  parent[l] = mid;
  parent[r] = mid;
  return mid;
}

}  // namespace

std::vector<Tree> double_binary_trees(int n) {
  require(n >= 1, "double_binary_trees: {} vertices", n);
  std::vector<int> p0(n), p1(n, -1);
  for (int v = 0; v < n; ++v) {
    int c0, c1;
    binary_tree_links(n, v, &p0[v], &c0, &c1);
  }
  if (n % 2 == 0) {
    for (int v = 0; v < n; ++v) {
      int u, c0, c1;
      binary_tree_links(n, n - 1 - v, &u, &c0, &c1);
      p1[v] = u < 0 ? -1 : n - 1 - u;
    }
  } else {
    full_inorder(0, n - 1, p1);
  }
  return {tree_from_parents(std::move(p0)), tree_from_parents(std::move(p1))};
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
  p.trees = double_binary_trees(view.num_nodes());
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
  // Messages of the whole job, for the shared-CPU term (HostCpu): Weft's schedules cut every
  // block into slices of at most kSliceBytes, one message each.
  const double kSliceBytes = 512.0 * 1024;
  auto slices = [&](double bytes) { return std::max(1.0, std::ceil(bytes / kSliceBytes)); };
  // An algorithm's time: its latency terms plus the slower of its data transfer and, where ranks
  // outnumber a machine's cores, the CPU its messages queue for (a roofline: the link and the
  // cores work at the same time; with ranks <= cores the CPU term is 0).
  auto add = [&](Algorithm a, double xfer, double lat, const Bottleneck& b, std::vector<std::string> why,
                 double messages) {
    double us = lat + xfer;
    if (const double cpu = host_cpu_us(m.host, messages, p); cpu > 0) {
      us = lat + std::max(xfer, cpu);
      why.push_back(fmt::format("{} ranks share {} cores: {:.0f} messages per machine need {:.0f} us of CPU{}", m.host.ranks,
                                m.host.cores, messages * std::min(m.host.ranks, p) / p, cpu,
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
        allreduce ? 2.0 * p * (p - 1) * slices(S / p) : rooted ? (p - 1) * slices(S) : 1.0 * p * (p - 1) * slices(S / p));
  }
  // Double binary tree across nodes, chain inside each node.
  if (allreduce || rooted) {
    Bottleneck b;
    for (int n = 0; n < N; ++n) {
      const auto& ring = base.levels[0].groups[n];
      for (size_t i = 0; i + 1 < ring.size(); ++i) b.add(rank_edge(view, m, ring[i], ring[i + 1], false));
      if (N > 1) b.add(net_edge(view, m, view.ranks_of_node[n][0], false));
    }
    if (b.gbs <= 0) b.add(m.edge(Path{PathClass::kSelf, Fabric::kNone, 0, 0}));
    int depth = 0;
    for (const auto& t : base.trees) depth = std::max(depth, t.depth());
    const int steps = depth + R - 1;
    const double xfer = (allreduce ? 2.0 : 1.0) * transfer_us(S, b.gbs), lat = (allreduce ? 2.0 : 1.0) * steps * b.alpha;
    add(Algorithm::kDoubleBinaryTree, xfer, lat, b,
        {fmt::format("two complementary binary trees over {} nodes (depth {}), chain of {} ranks per node", N, depth, R),
         "latency grows with log2(nodes) instead of ranks; each tree carries half the data"},
        allreduce ? 4.0 * (p - 1) * slices(S / 2) : (p - 1) * slices(S));
  }
  // Recursive halving-doubling: every rank exchanges with partners at distance 1, 2, 4, ...
  {
    int p2 = 1, steps = 0;
    while (p2 * 2 <= p) {
      p2 *= 2;
      ++steps;
    }
    const int extra = p - p2;
    Bottleneck b;
    for (int n = 0; n < N; ++n) {
      const auto& ranks = view.ranks_of_node[n];
      for (size_t i = 0; i < ranks.size(); ++i)
        for (size_t j = i + 1; j < ranks.size(); ++j) b.add(rank_edge(view, m, ranks[i], ranks[j], false));
      if (N > 1)
        for (int r : ranks) b.add(net_edge(view, m, r, true));
    }
    if (b.gbs <= 0) b.add(m.edge(Path{PathClass::kSelf, Fabric::kNone, 0, 0}));
    const double frac = p2 > 1 ? (p2 - 1.0) / p2 : 0.0;
    const double k = allreduce || rooted ? 2.0 : 1.0;
    double xfer = k * frac * transfer_us(S, b.gbs), lat = k * steps * b.alpha;
    if (extra > 0) xfer += (allreduce ? 2.0 : 1.0) * transfer_us(S, b.gbs), lat += (allreduce ? 2.0 : 1.0) * b.alpha;
    add(Algorithm::kHalvingDoubling, xfer, lat, b,
        {fmt::format("{} exchange steps over {} ranks{}; all ranks of a node share its NICs at once", steps, p2,
                     extra > 0 ? fmt::format(" plus a fold-in of {} extra ranks", extra) : std::string())},
        (allreduce ? 2.0 : 1.0) * (p2 * steps + extra));
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
        allreduce ? p * (2.0 * (R - 1) * slices(chunk) + 2.0 * (N - 1) * slices(chunk / N))
        : rooted  ? p * ((R - 1) * slices(chunk) + (N - 1.0) * slices(chunk))
                  : p * ((R - 1.0) * N + (N - 1)) * slices(S / p));
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
    s += fmt::format("  tree {} (root node {}, depth {}):{}\n", t, trees[t].root, trees[t].depth(),
                     edges.empty() ? " (single node)" : edges);
  }
  for (const auto& l : levels) {
    std::string g;
    for (const auto& grp : l.groups) g += " {" + ranks_text(grp) + "}";
    s += fmt::format("  level {}:{}\n", l.name, g);
  }
  return s;
}

}  // namespace weft::topo
