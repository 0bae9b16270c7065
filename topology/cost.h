// Cost model: latency (alpha, microseconds) and bandwidth (GB/s) per path class and for the
// network. Defaults below; a path's own bottleneck bandwidth (NVLink/XGMI link bandwidth, PCIe link
// speed, NIC speed) caps the class bandwidth. Override with a JSON file (WEFT_COST_MODEL=path):
//   {"classes": {"NV": {"alpha_us": 1.0, "gbs": 150}, "SYS": {"alpha_us": 5}},
//    "net": {"alpha_us": 6.0, "gbs": 25}, "host": {"msg_cpu_us": 20}}
// A "gbs" given in the file replaces the class bandwidth and is not capped by the topology.
// "host" describes the CPU the ranks of one machine share (see HostCpu); "fabric" the network
// between the nodes when it is more than one non-blocking switch (see NetFabric).
#pragma once
#include <nlohmann/json.hpp>

#include <array>
#include <string>
#include <string_view>
#include <vector>

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

// A direct link between two nodes (node indices of the cluster view: nodes in order of their
// first rank), used in both directions, each direction at gbs.
struct NodeLink {
  int a = 0, b = 0;
  double gbs = 0;
  double alpha_us = -1;  // < 0: the model's net alpha
  bool operator==(const NodeLink&) const = default;
};

// The network between the nodes (topology/netgraph.h builds its graph). Default: every NIC on one
// non-blocking switch. Leaves: `leaf_nodes` nodes per leaf switch (rail-optimised: one leaf per
// NIC index, so NIC k of those nodes share a leaf; else all their NICs), leaves joined by a spine
// whose uplinks carry the leaf's NIC bandwidth divided by `oversubscription`. A mesh (`links`):
// no switch at all, direct links of their own rate between node pairs, traffic between nodes
// without a link routed over the fewest links (then the widest path).
// How the links between nodes share themselves among the connections that cross them, for
// weft-sim's event level (collectives/event_sim.h): "fair" (default), each connection an equal
// share, as credit-based fabrics (InfiniBand, NVLink) arbitrate; "fifo", each connection in
// proportion to the messages it has queued, as TCP through a link's FIFO queue (the emulated
// cluster: scripts/netns-cluster).
// JSON: "fabric": {"leaf_nodes": 32, "rail_optimized": true, "oversubscription": 2,
//                  "links": "0-1:1gbit,1-2:1gbit,0-2:250mbit"  (or [{"nodes": [0, 1], "gbs": 0.125}]),
//                  "queues": "fair" | "fifo"}
struct NetFabric {
  int leaf_nodes = 0;
  bool rail_optimized = false;
  double oversubscription = 1;
  std::vector<NodeLink> links;
  bool fifo_queues = false;
  bool leaves() const { return leaf_nodes > 0; }
  bool mesh() const { return !links.empty(); }
  bool active() const { return leaves() || mesh(); }
};

// "400gbit", "250mbit", "100kbit", "12.5GB/s" (bytes), "25" (GB/s) -> GB/s; weft::Error naming
// the text when it is not a positive rate.
double parse_rate_gbs(std::string_view text);
// "0-1:1gbit,1-2:250mbit" -> links (both directions each); weft::Error naming the bad entry.
std::vector<NodeLink> parse_node_links(std::string_view text);

struct CostModel {
  std::array<LinkCost, 7> classes{};      // indexed by PathClass; kSelf = two ranks on one device or NUMA node
  std::array<bool, 7> fixed_gbs{};        // set by an override: ignore the topology's bandwidth
  LinkCost net{};                         // between nodes; gbs is the fallback when a NIC speed is unknown
  bool fixed_net_gbs = false;
  HostCpu host{};
  NetFabric fabric{};

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
