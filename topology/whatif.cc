// What-if edits of node summaries (whatif.h).
#include "topology/whatif.h"

#include <algorithm>
#include <cmath>

#include "runtime/base/error.h"
#include "topology/paths.h"
#include "topology/ring.h"

namespace weft::topo {

namespace {

void rebuild_ring(NodeSummary& s) {
  std::vector<std::vector<double>> w(s.gpus.size(), std::vector<double>(s.gpus.size(), 0));
  for (int a = 0; a < s.num_gpus(); ++a)
    for (int b = 0; b < s.num_gpus(); ++b) w[a][b] = ring_edge_weight(s.gpu_gpu(a, b));
  s.ring = s.gpus.empty() ? std::vector<int>{} : best_ring(w).order;
}

}  // namespace

NodeSummary switched_node(int gpus, double nv_gbs) {
  require(gpus >= 1 && gpus <= 4096, "what-if node: {} GPUs", gpus);
  NodeSummary s;
  s.hostname = "synthetic";
  s.source = fmt::format("{} GPUs on NVSwitch at {} GB/s", gpus, nv_gbs);
  s.numa_nodes.push_back({0, 0, ""});
  for (int g = 0; g < gpus; ++g) s.gpus.push_back({fmt::format("GPU{}", g), "", 0, fmt::format("gpu{}", g), "", 0});
  s.paths.assign(gpus, std::vector<Path>(gpus, Path{PathClass::kSYS, Fabric::kNone, 0, 0}));
  for (int g = 0; g < gpus; ++g) s.paths[g][g] = Path{PathClass::kSelf, Fabric::kNone, 0, 0};
  s.nic_for_gpu.assign(gpus, -1);
  set_gpu_switch(s, nv_gbs);
  return s;
}

void set_gpu_switch(NodeSummary& s, double nv_gbs) {
  require(nv_gbs > 0, "what-if node: NVSwitch bandwidth {} GB/s", nv_gbs);
  const int links = std::max(1, static_cast<int>(std::lround(nv_gbs / 25.0)));
  for (int a = 0; a < s.num_gpus(); ++a)
    for (int b = 0; b < s.num_gpus(); ++b)
      if (a != b) s.paths[a][b] = Path{PathClass::kNV, Fabric::kNVLink, links, nv_gbs};
  if (s.num_gpus() > 1) s.fabric = Fabric::kNVLink, s.gpu_switch = true;
  rebuild_ring(s);
}

void set_nics(NodeSummary& s, int k, double gbs) {
  require(k >= 1 && k <= 1024 && gbs > 0, "what-if node: {} NICs of {} GB/s", k, gbs);
  const int G = s.num_gpus();
  std::vector<std::vector<Path>> paths(G + k, std::vector<Path>(G + k, Path{PathClass::kSYS, Fabric::kNone, 0, 0}));
  for (int a = 0; a < G; ++a)
    for (int b = 0; b < G; ++b) paths[a][b] = s.paths[a][b];
  s.nics.clear();
  for (int n = 0; n < k; ++n) {
    s.nics.push_back({fmt::format("net{}", n), "", -1, fmt::format("net{}", n), "", gbs});
    paths[G + n][G + n] = Path{PathClass::kSelf, Fabric::kNone, 0, 0};
  }
  s.nic_for_gpu.assign(G, -1);
  for (int g = 0; g < G; ++g) {
    const int own = static_cast<int>(static_cast<long long>(g) * k / G);
    s.nic_for_gpu[g] = own;
    for (int n = 0; n < k; ++n) {
      const PathClass c = n == own ? PathClass::kPIX : PathClass::kSYS;
      paths[g][G + n] = paths[G + n][g] = Path{c, Fabric::kNone, 0, 0};
    }
  }
  if (G == 0)
    for (int a = 0; a < k; ++a)
      for (int b = 0; b < k; ++b)
        if (a != b) paths[a][b] = Path{PathClass::kNODE, Fabric::kNone, 0, 0};
  s.paths = std::move(paths);
}

void set_nic_speed(NodeSummary& s, double gbs) {
  if (s.nics.empty()) return set_nics(s, 1, gbs);
  for (auto& n : s.nics) n.gbs = gbs;
}

}  // namespace weft::topo
