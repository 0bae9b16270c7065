// NodeSummary: the compact, serialisable view of one node that ranks exchange, and Binding: which
// devices one rank uses. JSON via nlohmann (schema in docs/TOPOLOGY.md).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "topology/model.h"

namespace weft::topo {

struct NumaInfo {
  int os_index = 0;
  int package = -1;
  std::string cpuset;
  bool operator==(const NumaInfo&) const = default;
};

struct DeviceInfo {
  std::string id;       // "GPU0" or the NIC's OS name ("mlx5_0")
  std::string pci;      // bus id ("" when unknown)
  int numa = -1;        // NUMA OS index, -1 unknown
  std::string os_name;  // GPU: "nvml0", "rsmi3", ...; NIC: same as id
  std::string cpuset;   // CPU affinity (list form)
  double gbs = 0;       // NIC: port speed GB/s
  bool operator==(const DeviceInfo&) const = default;
};

struct NodeSummary {
  std::string hostname;
  std::string source;  // "live" or the file it came from
  Fabric fabric = Fabric::kNone;
  bool gpu_switch = false;  // GPU links go through switches (NVSwitch): each GPU's links are one port
  std::vector<NumaInfo> numa_nodes;
  std::vector<DeviceInfo> gpus;  // PCI bus order; id "GPU<i>"
  std::vector<DeviceInfo> nics;  // PCI bus order
  // Over devices: GPUs 0..G-1 then NICs G..G+N-1.
  std::vector<std::vector<Path>> paths;
  std::vector<int> nic_for_gpu;  // NIC index per GPU (-1: no NIC)
  std::vector<int> ring;         // best intra-node ring over GPU indices

  int num_gpus() const { return static_cast<int>(gpus.size()); }
  int num_nics() const { return static_cast<int>(nics.size()); }
  int num_devices() const { return num_gpus() + num_nics(); }
  const std::string& device_id(int d) const { return d < num_gpus() ? gpus[d].id : nics[d - num_gpus()].id; }
  const Path& gpu_gpu(int a, int b) const { return paths.at(a).at(b); }
  const Path& gpu_nic(int g, int n) const { return paths.at(g).at(num_gpus() + n); }
  const Path& nic_nic(int a, int b) const { return paths.at(num_gpus() + a).at(num_gpus() + b); }
  int nic_index(const std::string& id) const;  // -1 when absent
  bool operator==(const NodeSummary&) const = default;
};

// What one rank uses: -1 / empty for none.
struct Binding {
  int gpu = -1;     // GPU index within its node's summary
  std::string nic;  // NIC id
  int numa = -1;    // NUMA OS index
  bool operator==(const Binding&) const = default;
};

NodeSummary summarize(const NodeTopology& topo);

// Default binding of local rank `local_rank` of `local_size` ranks on a node: GPUs round-robin,
// the GPU's rail NIC and NUMA node; on a CPU-only node ranks are spread over NUMA nodes in blocks
// and each takes the nearest NIC (balanced).
Binding default_binding(const NodeSummary& s, int local_rank, int local_size);
std::vector<Binding> default_bindings(const NodeSummary& s, int local_size);

nlohmann::json to_json(const NodeSummary& s);
NodeSummary summary_from_json(const nlohmann::json& j);  // throws weft::Error on bad input
nlohmann::json to_json(const Binding& b);
Binding binding_from_json(const nlohmann::json& j);

// The `weft-topo --json` document: gpus, nics, numa_nodes, paths (labels), path_gbs, nic_for_gpu, ring.
nlohmann::json report_json(const NodeSummary& s);

}  // namespace weft::topo
