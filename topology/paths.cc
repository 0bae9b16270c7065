#include "topology/paths.h"

#include <algorithm>
#include <numeric>

namespace weft::topo {
namespace {

std::vector<int> chain_of(const NodeTopology& topo, int node) {
  std::vector<int> chain;
  const int n = static_cast<int>(topo.pci.size());
  while (node >= 0 && node < n && static_cast<int>(chain.size()) <= n) {
    chain.push_back(node);
    node = topo.pci[node].parent;
  }
  return chain;
}

void take_min(double& acc, double v) {
  if (v > 0 && (acc <= 0 || v < acc)) acc = v;
}

bool share_numa(const PciNode& a, const PciNode& b) {
  for (int x : a.numas)
    if (std::find(b.numas.begin(), b.numas.end(), x) != b.numas.end()) return true;
  return false;
}

}  // namespace

Path pci_path(const NodeTopology& topo, int a, int b) {
  Path p;
  if (a == b) {
    // Two devices on one PCI function (NIC ports, GPU partitions).
    p.cls = PathClass::kPIX;
    p.gbs = a >= 0 && a < static_cast<int>(topo.pci.size()) ? topo.pci[a].link_gbs : 0;
    return p;
  }
  const auto ca = chain_of(topo, a);
  const auto cb = chain_of(topo, b);
  size_t ia = 0, ib = 0;
  bool found = false;
  for (ia = 0; ia < ca.size() && !found; ++ia)
    for (ib = 0; ib < cb.size(); ++ib)
      if (ca[ia] == cb[ib]) {
        found = true;
        break;
      }
  if (found) --ia;
  // Bottleneck over the links traversed below the common ancestor (or to the roots).
  const size_t ea = found ? ia : ca.size();
  const size_t eb = found ? ib : cb.size();
  int bridges_a = 0, bridges_b = 0;
  for (size_t i = 0; i < ea; ++i) {
    take_min(p.gbs, topo.pci[ca[i]].link_gbs);
    if (i > 0 && topo.pci[ca[i]].kind == PciKind::kBridge) ++bridges_a;
  }
  for (size_t i = 0; i < eb; ++i) {
    take_min(p.gbs, topo.pci[cb[i]].link_gbs);
    if (i > 0 && topo.pci[cb[i]].kind == PciKind::kBridge) ++bridges_b;
  }
  if (found) {
    switch (topo.pci[ca[ia]].kind) {
      case PciKind::kBridge:
      case PciKind::kDevice:
        p.cls = std::max(bridges_a, bridges_b) <= 1 ? PathClass::kPIX : PathClass::kPXB;
        return p;
      case PciKind::kHostBridge: p.cls = PathClass::kPHB; return p;
      case PciKind::kCpu: p.cls = PathClass::kNODE; return p;
    }
  }
  if (ca.empty() || cb.empty()) return p;
  const PciNode& ra = topo.pci[ca.back()];
  const PciNode& rb = topo.pci[cb.back()];
  p.cls = share_numa(ra, rb) ? PathClass::kNODE : PathClass::kSYS;
  return p;
}

Path gpu_gpu_path(const NodeTopology& topo, int a, int b) {
  if (a == b) return Path{PathClass::kSelf, Fabric::kNone, 0, 0};
  const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
  if (ua < topo.gpu_links.size() && ub < topo.gpu_links[ua].size() && topo.gpu_links[ua][ub] > 0) {
    Fabric f = topo.fabric == Fabric::kNone ? Fabric::kNVLink : topo.fabric;
    return Path{PathClass::kNV, f, topo.gpu_links[ua][ub], topo.gpu_link_gbs[ua][ub]};
  }
  return pci_path(topo, topo.gpus[a].node, topo.gpus[b].node);
}

Path gpu_nic_path(const NodeTopology& topo, int gpu, int nic) {
  return pci_path(topo, topo.gpus[gpu].node, topo.nics[nic].node);
}

Path nic_nic_path(const NodeTopology& topo, int a, int b) {
  if (a == b) return Path{PathClass::kSelf, Fabric::kNone, 0, 0};
  return pci_path(topo, topo.nics[a].node, topo.nics[b].node);
}

std::vector<std::vector<Path>> path_matrix(const NodeTopology& topo) {
  const int g = static_cast<int>(topo.gpus.size());
  const int n = g + static_cast<int>(topo.nics.size());
  std::vector<std::vector<Path>> m(n, std::vector<Path>(n));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (i < g && j < g) m[i][j] = gpu_gpu_path(topo, i, j);
      else if (i < g) m[i][j] = gpu_nic_path(topo, i, j - g);
      else if (j < g) m[i][j] = gpu_nic_path(topo, j, i - g);
      else m[i][j] = nic_nic_path(topo, i - g, j - g);
    }
  return m;
}

std::vector<int> assign_nearest_nics(const std::vector<std::vector<PathClass>>& classes,
                                     const std::vector<double>& nic_gbs) {
  const size_t items = classes.size();
  const size_t nics = nic_gbs.size();
  std::vector<int> out(items, -1);
  if (nics == 0) return out;
  auto best_class = [&](size_t i) {
    int best = class_rank(PathClass::kSYS) + 1;
    for (size_t k = 0; k < nics && k < classes[i].size(); ++k) best = std::min(best, class_rank(classes[i][k]));
    return best;
  };
  std::vector<size_t> order(items);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return best_class(x) < best_class(y); });
  std::vector<int> load(nics, 0);
  for (size_t i : order) {
    int pick = -1;
    for (size_t k = 0; k < nics; ++k) {
      const int ck = k < classes[i].size() ? class_rank(classes[i][k]) : class_rank(PathClass::kSYS);
      if (pick < 0) {
        pick = static_cast<int>(k);
        continue;
      }
      const int cp = static_cast<size_t>(pick) < classes[i].size() ? class_rank(classes[i][pick]) : class_rank(PathClass::kSYS);
      if (ck != cp) {
        if (ck < cp) pick = static_cast<int>(k);
        continue;
      }
      if (load[k] != load[pick]) {
        if (load[k] < load[pick]) pick = static_cast<int>(k);
        continue;
      }
      if (nic_gbs[k] > nic_gbs[pick]) pick = static_cast<int>(k);
    }
    out[i] = pick;
    ++load[pick];
  }
  return out;
}

}  // namespace weft::topo
