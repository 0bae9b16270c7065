// The capacitated network of a job (netgraph.h).
#include "topology/netgraph.h"

#include <algorithm>
#include <map>
#include <queue>
#include <string>

#include "runtime/base/error.h"

namespace weft::topo {

namespace {
// Links that never limit: a rank's way into its host's network stack (mesh), a PCIe path of
// unknown speed.
constexpr double kUnlimitedGbs = 1e6;
}  // namespace

int NetGraph::add_vertex(std::string name, int node) {
  names_.push_back(std::move(name));
  node_of_vertex_.push_back(node);
  out_.emplace_back();
  return vertices_++;
}

int NetGraph::add_pair(int a, int b, double gbs) {
  require(gbs > 0, "network graph: a link of no bandwidth between {} and {}", names_[a], names_[b]);
  const int e = static_cast<int>(edges_.size());
  edges_.push_back({a, b, gbs});
  edges_.push_back({b, a, gbs});
  out_[a].push_back({b, e});
  out_[b].push_back({a, e + 1});
  return e;
}

int NetGraph::edge_between(int a, int b) const {
  for (const auto& [to, e] : out_[a])
    if (to == b) return e;
  return -1;
}

NetGraph::NetGraph(const ClusterView& view, const CostModel& model) : view_(view), model_(model) {
  const int p = view.size(), N = view.num_nodes();
  ranks_ = p;
  for (int r = 0; r < p; ++r) add_vertex(fmt::format("rank {}", r), view.node_of_rank[r]);
  hub_.assign(N, -1);
  nvswitch_.assign(N, -1);
  router_.assign(N, -1);
  nic_vertex_.assign(p, -1);
  rank_hub_.assign(p, -1);
  rank_switch_.assign(p, -1);
  rank_router_.assign(p, -1);
  rank_nic_.assign(p, -1);
  for (int n = 0; n < N; ++n) build_node(n);
  if (N <= 1) return;
  if (model.fabric.mesh()) build_mesh();
  else build_switched();
}

// Inside node n: GPU links (direct, or one port per GPU into the NVSwitches), and a hub for every
// other path (shared memory, PCIe), each rank's way into it as fast as its fastest such path.
void NetGraph::build_node(int n) {
  const ClusterView& view = view_;
  const CostModel& model = model_;
  const std::vector<int>& ranks = view.ranks_of_node[n];
  const NodeSummary& s = view.nodes[n];
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int a = ranks[i];
    double hub_gbs = 0, port_gbs = 0;
    for (size_t j = 0; j < ranks.size(); ++j) {
      if (i == j) continue;
      const int b = ranks[j];
      const Path path = intra_path(view, a, b);
      const LinkCost c = model.edge(path);
      if (path.cls == PathClass::kNV) {
        if (s.gpu_switch) port_gbs = std::max(port_gbs, c.gbs);
        else if (j > i && edge_between(a, b) < 0) add_pair(a, b, c.gbs);
      } else {
        hub_gbs = std::max(hub_gbs, c.gbs);
      }
    }
    if (port_gbs > 0) {
      if (nvswitch_[n] < 0) nvswitch_[n] = add_vertex(fmt::format("node {} NVSwitch", n), n);
      rank_switch_[a] = add_pair(a, nvswitch_[n], port_gbs);
    }
    if (hub_gbs > 0) {
      if (hub_[n] < 0) hub_[n] = add_vertex(fmt::format("node {} host", n), n);
      rank_hub_[a] = add_pair(a, hub_[n], hub_gbs);
    }
  }
}

// A mesh: a router per node, the fabric's direct node links between them, and from every node the
// fewest links, then the widest path (deterministic: lower node first).
void NetGraph::build_mesh() {
  const ClusterView& view = view_;
  const CostModel& model = model_;
  const int N = view.num_nodes();
  for (int n = 0; n < N; ++n) {
    router_[n] = add_vertex(fmt::format("node {} router", n), n);
    for (int r : view.ranks_of_node[n]) rank_router_[r] = add_pair(r, router_[n], kUnlimitedGbs);
  }
  std::vector<std::vector<std::pair<int, int>>> adj(N);  // node -> (node, router edge)
  std::vector<double> link_alpha;
  for (const NodeLink& l : model.fabric.links) {
    if (l.a >= N || l.b >= N) continue;  // a link of nodes this job does not have
    const int e = add_pair(router_[l.a], router_[l.b], l.gbs);
    adj[l.a].push_back({l.b, e});
    adj[l.b].push_back({l.a, e + 1});
    link_alpha.resize(edges_.size(), 0);
    link_alpha[e] = link_alpha[e + 1] = l.alpha_us >= 0 ? l.alpha_us : model.net.alpha_us;
  }
  // From every node: the fewest links, then the widest path (deterministic: lower node first).
  mesh_route_.assign(N, std::vector<std::vector<int>>(N));
  mesh_alpha_.assign(N, std::vector<double>(N, 0));
  for (int src = 0; src < N; ++src) {
    std::vector<int> hops(N, -1), via(N, -1), prev(N, -1);
    std::vector<double> width(N, 0);
    hops[src] = 0;
    width[src] = kUnlimitedGbs;
    std::vector<int> frontier{src};
    while (!frontier.empty()) {
      std::vector<int> next;
      for (int u : frontier)
        for (const auto& [v, e] : adj[u]) {
          const double w = std::min(width[u], edges_[e].gbs);
          if (hops[v] < 0) {
            hops[v] = hops[u] + 1, width[v] = w, via[v] = e, prev[v] = u;
            next.push_back(v);
          } else if (hops[v] == hops[u] + 1 && w > width[v]) {
            width[v] = w, via[v] = e, prev[v] = u;
          }
        }
      std::sort(next.begin(), next.end());
      frontier = std::move(next);
    }
    for (int dst = 0; dst < N; ++dst) {
      if (dst == src) continue;
      if (hops[dst] < 0)
        fail(ErrorCode::kInvalidArgument, "network: node {} has no links that reach node {} (fabric links {})", src,
             dst, model.fabric.links.size());
      std::vector<int> path;
      for (int v = dst; v != src; v = prev[v]) {
        path.push_back(via[v]);
        mesh_alpha_[src][dst] += link_alpha[via[v]];
      }
      std::reverse(path.begin(), path.end());
      mesh_route_[src][dst] = std::move(path);
    }
  }
}

// Switched: every rank's NIC, then leaves and a spine, or one core switch.
void NetGraph::build_switched() {
  const ClusterView& view = view_;
  const CostModel& model = model_;
  const int p = view.size();
  const NetFabric& f = model.fabric;
  std::map<std::pair<int, std::string>, int> nics;  // (node, NIC id) -> vertex
  std::map<int, double> leaf_gbs;                    // leaf -> the NIC bandwidth under it
  std::map<int, int> leaf_vertex;                    // leaf index -> vertex
  int core = -1;
  for (int r = 0; r < p; ++r) {
    const int n = view.node_of_rank[r];
    const NodeSummary& s = view.nodes[n];
    const Binding& b = view.bindings[r];
    const int k = s.nic_index(b.nic);
    auto [it, fresh] = nics.try_emplace({n, b.nic}, -1);
    if (fresh) {
      it->second = add_vertex(fmt::format("node {} NIC {}", n, b.nic.empty() ? std::string("(net)") : b.nic), n);
      const double gbs = model.network(k >= 0 ? s.nics[k].gbs : 0, 1).gbs;
      int above;
      if (f.leaves()) {
        const int leaf = f.rail_optimized ? (n / f.leaf_nodes) * std::max(1, s.num_nics()) + std::max(0, k) : n / f.leaf_nodes;
        auto [lt, new_leaf] = leaf_vertex.try_emplace(leaf, -1);
        if (new_leaf) lt->second = add_vertex(fmt::format("leaf {}", leaf));
        above = lt->second;
        leaf_gbs[above] += gbs;
      } else {
        if (core < 0) core = add_vertex("switch");
        above = core;
      }
      nic_up_.resize(vertices_, -1);
      nic_up_[it->second] = add_pair(it->second, above, gbs);
    }
    nic_vertex_[r] = it->second;
    double pcie = kUnlimitedGbs;
    if (b.gpu >= 0 && k >= 0)
      if (const LinkCost c = model.edge(s.gpu_nic(b.gpu, k)); c.gbs > 0) pcie = c.gbs;
    rank_nic_[r] = add_pair(r, it->second, pcie);
  }
  nic_up_.resize(vertices_, -1);
  leaf_up_.assign(vertices_ + 1, -1);
  if (f.leaves() && leaf_vertex.size() > 1) {
    spine_ = add_vertex("spine");
    for (const auto& [index, leaf] : leaf_vertex) leaf_up_[leaf] = add_pair(leaf, spine_, leaf_gbs[leaf] / f.oversubscription);
  }
}

void NetGraph::route(int a, int b, std::vector<int>& out) const {
  if (a == b) return;
  // Links are made in pairs: edge e goes one way, e + 1 the other.
  const int na = view_.node_of_rank[a], nb = view_.node_of_rank[b];
  if (na == nb) {
    if (const int e = edge_between(a, b); e >= 0) return out.push_back(e);
    if (rank_switch_[a] >= 0 && rank_switch_[b] >= 0 && intra_path(view_, a, b).cls == PathClass::kNV) {
      out.push_back(rank_switch_[a]), out.push_back(rank_switch_[b] + 1);
      return;
    }
    require(rank_hub_[a] >= 0 && rank_hub_[b] >= 0, "network graph: no path from rank {} to rank {}", a, b);
    out.push_back(rank_hub_[a]), out.push_back(rank_hub_[b] + 1);
    return;
  }
  if (!mesh_route_.empty()) {
    out.push_back(rank_router_[a]);
    out.insert(out.end(), mesh_route_[na][nb].begin(), mesh_route_[na][nb].end());
    out.push_back(rank_router_[b] + 1);
    return;
  }
  const int x = nic_vertex_[a], y = nic_vertex_[b];
  out.push_back(rank_nic_[a]);
  if (x != y) {
    const int up = nic_up_[x], down = nic_up_[y];
    out.push_back(up);
    const int lx = edges_[up].to, ly = edges_[down].to;
    if (lx != ly) out.push_back(leaf_up_[lx]), out.push_back(leaf_up_[ly] + 1);
    out.push_back(down + 1);
  }
  out.push_back(rank_nic_[b] + 1);
}

double NetGraph::alpha_us(int a, int b) const {
  if (a == b) return 0;
  const int na = view_.node_of_rank[a], nb = view_.node_of_rank[b];
  if (na != nb && !mesh_alpha_.empty()) return mesh_alpha_[na][nb];
  return rank_edge(view_, model_, a, b, false).alpha_us;
}

std::string NetGraph::vertex_name(int v) const { return v >= 0 && v < vertices_ ? names_[v] : "?"; }

double flows_time_us(const NetGraph& g, const std::vector<Flow>& flows, int* busiest) {
  std::vector<double> load(g.edges().size(), 0.0);
  std::vector<int> path;
  for (const Flow& f : flows) {
    if (f.bytes <= 0 || f.from == f.to) continue;
    path.clear();
    g.route(f.from, f.to, path);
    for (int e : path) load[e] += f.bytes;
  }
  double worst = 0;
  int which = -1;
  for (size_t e = 0; e < load.size(); ++e) {
    const double us = transfer_us(load[e], g.edges()[e].gbs);
    if (us > worst) worst = us, which = static_cast<int>(e);
  }
  if (busiest) *busiest = which;
  return worst;
}

}  // namespace weft::topo
