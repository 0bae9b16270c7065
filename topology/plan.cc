#include "topology/plan.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "runtime/base/error.h"
#include "topology/flows.h"
#include "topology/ring.h"

namespace weft::topo {

namespace {

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

std::string Plan::explain() const {
  std::string s = fmt::format("{} {} of {} bytes: predicted {:.2f} us (bottleneck {:.2f} GB/s, {:.2f} us per step)\n",
                              name.empty() ? algorithm : name, collective_name(collective), bytes, predicted_us,
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
