// Which GPU, NIC and CPUs each local rank gets (weftrun --bind). Pure policy over a NodeTopology,
// so that it is testable with made-up machines.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "launcher/node_topology.h"

namespace weft::launcher {

enum class BindMode { kAuto, kNone, kNuma, kGpu };

// "none"|"numa"|"gpu"|"auto" -> mode; nullopt for anything else.
std::optional<BindMode> parse_bind_mode(const std::string& text);
const char* bind_mode_name(BindMode mode);

// kAuto -> kGpu when the node has GPUs, else kNuma when it has more than one NUMA node, else kNone.
BindMode resolve_bind_mode(BindMode requested, const NodeTopology& topo);

struct RankBinding {
  std::vector<int> cpus;    // empty: leave the affinity alone
  std::string cuda_device;  // CUDA_VISIBLE_DEVICES value; empty: leave alone
  std::string nic;          // UCX_NET_DEVICES value; empty: leave alone
  std::string explanation;  // one line for --verbose
};

// One binding per local rank, round-robin over GPUs (kGpu) or NUMA nodes (kNuma). cuda_visible is
// weftrun's own CUDA_VISIBLE_DEVICES: when set, kGpu hands out its entries instead of every GPU.
// Throws weft::Error(kInvalidUsage) for kGpu on a node without GPUs.
std::vector<RankBinding> plan_binding(BindMode mode, const NodeTopology& topo, int local_size,
                                      const std::optional<std::string>& cuda_visible);

// "0-3,8,10-11".
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace weft::launcher
