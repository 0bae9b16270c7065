// Cost model: latency (alpha, microseconds) and bandwidth (GB/s) per path class and for the
// network. Defaults below; a path's own bottleneck bandwidth (NVLink/XGMI link bandwidth, PCIe link
// speed, NIC speed) caps the class bandwidth. Override with a JSON file (WEFT_COST_MODEL=path):
//   {"classes": {"NV": {"alpha_us": 1.0, "gbs": 150}, "SYS": {"alpha_us": 5}},
//    "net": {"alpha_us": 6.0, "gbs": 25}, "host": {"msg_cpu_us": 20}}
// A "gbs" given in the file replaces the class bandwidth and is not capped by the topology.
// "host" describes the CPU the ranks of one machine share (see HostCpu).
#pragma once
#include <nlohmann/json.hpp>

#include <array>
#include <string>

#include "topology/model.h"

namespace weft::topo {

struct LinkCost {
  double alpha_us = 0;
  double gbs = 0;
};

// When more ranks share a machine than it has cores (emulated nodes on one machine, or an
// oversubscribed test job), a step's latency is mostly the wait for its receiver to get a core:
// each message costs its rank a burst of msg_cpu_us of CPU (sending, receiving, waking up), and a
// rank woken by a message waits for the bursts of the other ranks that share its core,
// msg_cpu_us x (ranks / cores - 1) (host_wait_us). Every step on an algorithm's critical path
// pays that wait, which overlaps with the transfer: a prediction is latency + max(transfer,
// steps x wait), so plans with fewer steps in sequence win at small sizes. No effect while
// ranks <= cores. ranks and cores come from the job (the communicator fills them in; `weft-topo
// plan --host-ranks/--host-cores`); msg_cpu_us from the file (scripts/netns-sweep calibrates it).
struct HostCpu {
  int ranks = 0;            // ranks sharing one machine (the most on any machine of the job)
  int cores = 0;            // cores they may use
  double msg_cpu_us = 20;   // CPU burst per message on a machine with more ranks than cores
  bool oversubscribed() const { return cores > 0 && ranks > cores; }
};

struct CostModel {
  std::array<LinkCost, 7> classes{};      // indexed by PathClass; kSelf = two ranks on one device or NUMA node
  std::array<bool, 7> fixed_gbs{};        // set by an override: ignore the topology's bandwidth
  LinkCost net{};                         // between nodes; gbs is the fallback when a NIC speed is unknown
  bool fixed_net_gbs = false;
  HostCpu host{};

  static CostModel defaults();
  // defaults() plus the overrides in the JSON file (weft::Error naming the file on bad input).
  static CostModel load(const std::string& path);
  // WEFT_COST_MODEL when set, else defaults().
  static CostModel from_env();
  void apply_json(const nlohmann::json& j);
  nlohmann::json to_json() const;

  // Cost of one hop along a classified intra-node path.
  LinkCost edge(const Path& p) const;
  // Cost of one inter-node hop through a NIC of nic_gbs (0: unknown) shared by `sharing` ranks.
  LinkCost network(double nic_gbs, int sharing = 1) const;
};

// Microseconds each step on a critical path waits for a core when the busiest machine has more
// ranks than cores (HostCpu): msg_cpu_us x (ranks / cores - 1), ranks capped at the job's nranks;
// 0 otherwise.
double host_wait_us(const HostCpu& h, int nranks);

// Microseconds to move bytes at gbs GB/s.
inline double transfer_us(double bytes, double gbs) { return gbs > 0 ? bytes / (gbs * 1e3) : 0; }

}  // namespace weft::topo
