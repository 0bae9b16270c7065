#include "topology/report.h"

#include <fmt/format.h>

namespace weft::topo {

std::string format_matrix(const NodeSummary& s) {
  std::string out;
  auto line = [&](const std::string& l) { out += l + "\n"; };
  const int g = s.num_gpus(), d = s.num_devices();
  auto column = [&](int i) { return i < g ? s.gpus[i].id : fmt::format("NIC{}", i - g); };
  line(fmt::format("Host: {}  (source: {})", s.hostname.empty() ? "?" : s.hostname, s.source));
  if (g == 0) line("No GPU found: CPU-only view (NUMA nodes and NICs).");
  line("");
  if (d > 0) {
    std::string head;
    for (int i = 0; i < d; ++i) head += "\t" + column(i);
    line(head + "\tCPU Affinity\tNUMA Affinity");
    for (int i = 0; i < d; ++i) {
      std::string row = column(i);
      for (int j = 0; j < d; ++j) row += "\t" + (i == j ? std::string(" X ") : s.paths[i][j].label());
      const DeviceInfo& dev = i < g ? s.gpus[i] : s.nics[i - g];
      row += "\t" + (dev.cpuset.empty() ? std::string("N/A") : dev.cpuset);
      row += "\t" + (dev.numa < 0 ? std::string("N/A") : std::to_string(dev.numa));
      line(row);
    }
    line("");
  }
  line("Legend:");
  line("");
  line("  X    = Self");
  line("  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)");
  line("  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node");
  line("  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)");
  line("  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)");
  line("  PIX  = Connection traversing at most a single PCIe bridge");
  line("  NV#  = Connection traversing a bonded set of # NVLinks");
  line("  XGMI#= Connection traversing # AMD Infinity Fabric (XGMI) links");
  if (s.num_nics() > 0) {
    line("");
    line("NIC Legend:");
    line("");
    for (int i = 0; i < s.num_nics(); ++i)
      line(fmt::format("  NIC{}: {}{}", i, s.nics[i].id,
                       s.nics[i].gbs > 0 ? fmt::format(" ({:.1f} GB/s)", s.nics[i].gbs) : std::string()));
  } else {
    line("");
    line("No NIC found.");
  }
  line("");
  line("NUMA nodes:");
  for (const auto& n : s.numa_nodes)
    line(fmt::format("  node {}: package {} cpus {}", n.os_index, n.package, n.cpuset.empty() ? "?" : n.cpuset));
  if (g > 0) {
    line("");
    line("Rails (nearest NIC per GPU):");
    for (int i = 0; i < g; ++i) {
      int n = i < static_cast<int>(s.nic_for_gpu.size()) ? s.nic_for_gpu[i] : -1;
      line(fmt::format("  {} -> {}", s.gpus[i].id, n < 0 ? std::string("none") : fmt::format("{} ({})", s.nics[n].id, s.gpu_nic(i, n).label())));
    }
    std::string ring;
    for (int x : s.ring) ring += (ring.empty() ? "" : " -> ") + s.gpus[x].id;
    line("");
    line("Ring: " + ring);
  }
  return out;
}

}  // namespace weft::topo
