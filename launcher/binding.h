// Which GPU, NIC and CPUs each local rank gets (weftrun --bind). Pure policy over a NodeTopology,
// so that it is testable with made-up machines.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "launcher/node_topology.h"

namespace weft::launcher {

enum class BindMode { kAuto, kNone, kNuma, kGpu, kCores };

// "none"|"numa"|"gpu"|"cores"|"auto" -> mode; nullopt for anything else.
std::optional<BindMode> parse_bind_mode(const std::string& text);
const char* bind_mode_name(BindMode mode);

// kAuto -> kGpu when the node has GPUs, else kNuma when it has more than one NUMA node, else kCores
// when 2..#CPUs ranks share the node (a rank that the scheduler moves onto its peer's CPU stalls
// both: 64 MiB all-reduce at 2 ranks swung 4.9-8.4 GB/s unbound, 6.8-8.2 bound), else kNone.
BindMode resolve_bind_mode(BindMode requested, const NodeTopology& topo, int local_size = 0);

struct RankBinding {
  std::vector<int> cpus;    // empty: leave the affinity alone
  std::string cuda_device;  // CUDA_VISIBLE_DEVICES value; empty: leave alone
  std::string nic;          // UCX_NET_DEVICES value; empty: leave alone
  std::string explanation;  // one line for --verbose
};

// One binding per local rank, round-robin over GPUs (kGpu) or NUMA nodes (kNuma), or (kCores) the
// node's CPUs split into local_size disjoint contiguous shares, NUMA node by NUMA node (more
// ranks than CPUs: no binding). cuda_visible is
// weftrun's own CUDA_VISIBLE_DEVICES: when set, kGpu hands out its entries instead of every GPU.
// Throws weft::Error(kInvalidUsage) for kGpu on a node without GPUs.
std::vector<RankBinding> plan_binding(BindMode mode, const NodeTopology& topo, int local_size,
                                      const std::optional<std::string>& cuda_visible);

// "0-3,8,10-11".
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace weft::launcher
