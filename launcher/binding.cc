#include "launcher/binding.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "runtime/base/error.h"

namespace weft::launcher {

std::optional<BindMode> parse_bind_mode(const std::string& text) {
  if (text == "none") return BindMode::kNone;
  if (text == "numa") return BindMode::kNuma;
  if (text == "gpu") return BindMode::kGpu;
  if (text == "cores") return BindMode::kCores;
  if (text == "auto") return BindMode::kAuto;
  return std::nullopt;
}

const char* bind_mode_name(BindMode mode) {
  switch (mode) {
    case BindMode::kAuto: return "auto";
    case BindMode::kNone: return "none";
    case BindMode::kNuma: return "numa";
    case BindMode::kGpu: return "gpu";
    case BindMode::kCores: return "cores";
  }
  return "?";
}

namespace {
std::vector<int> node_cpus(const NodeTopology& topo) {
  std::vector<int> all;
  for (const NumaNode& n : topo.numa) all.insert(all.end(), n.cpus.begin(), n.cpus.end());
  return all;
}
}  // namespace

BindMode resolve_bind_mode(BindMode requested, const NodeTopology& topo, int local_size) {
  if (requested != BindMode::kAuto) return requested;
  if (!topo.gpus.empty()) return BindMode::kGpu;
  if (topo.numa.size() > 1) return BindMode::kNuma;
  if (local_size > 1 && static_cast<size_t>(local_size) <= node_cpus(topo).size()) return BindMode::kCores;
  return BindMode::kNone;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::vector<int> v = cpus;
  std::sort(v.begin(), v.end());
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(v[i]) : fmt::format("{}-{}", v[i], v[j]);
    i = j + 1;
  }
  return out;
}

namespace {

// The NIC nearest to a GPU: most shared PCI bridges, then same NUMA node.
const PciDevice* nic_for_gpu(const NodeTopology& topo, const PciDevice& gpu) {
  const PciDevice* best = nullptr;
  int best_score = -1;
  for (const PciDevice& nic : topo.nics) {
    int score = pci_affinity(gpu, nic) * 2 + (nic.numa == gpu.numa ? 1 : 0);
    if (score > best_score) best = &nic, best_score = score;
  }
  return best;
}

// The first NIC on a NUMA node, else the first NIC (round-robin by rank when several are equal).
const PciDevice* nic_for_numa(const NodeTopology& topo, int numa, int rank) {
  std::vector<const PciDevice*> local;
  for (const PciDevice& nic : topo.nics) {
    if (nic.numa == numa) local.push_back(&nic);
  }
  if (local.empty()) {
    for (const PciDevice& nic : topo.nics) local.push_back(&nic);
  }
  if (local.empty()) return nullptr;
  return local[static_cast<size_t>(rank) % local.size()];
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::string nic_value(const PciDevice* nic) { return nic ? nic->name + ":1" : std::string(); }

}  // namespace

std::vector<RankBinding> plan_binding(BindMode mode, const NodeTopology& topo, int local_size,
                                      const std::optional<std::string>& cuda_visible) {
  std::vector<RankBinding> out(static_cast<size_t>(std::max(local_size, 0)));
  mode = resolve_bind_mode(mode, topo, local_size);
  if (mode == BindMode::kNone) {
    for (RankBinding& b : out) b.explanation = "no binding (--bind none)";
    return out;
  }
  if (mode == BindMode::kCores) {
    const std::vector<int> cpus = node_cpus(topo);
    if (out.size() > cpus.size()) {
      for (RankBinding& b : out)
        b.explanation = fmt::format("no binding ({} ranks on {} CPUs: --bind cores needs a CPU per rank)", out.size(), cpus.size());
      return out;
    }
    // Rank r gets CPUs [r*C/n, (r+1)*C/n): equal shares, the remainder spread, nearby CPUs together.
    const size_t n = out.size(), c = cpus.size();
    for (size_t r = 0; r < n; ++r) {
      RankBinding& b = out[r];
      b.cpus.assign(cpus.begin() + static_cast<long>(r * c / n), cpus.begin() + static_cast<long>((r + 1) * c / n));
      int numa = 0;
      for (size_t k = 0; k < topo.numa.size(); ++k)
        if (std::find(topo.numa[k].cpus.begin(), topo.numa[k].cpus.end(), b.cpus.front()) != topo.numa[k].cpus.end())
          numa = static_cast<int>(k);
      b.nic = nic_value(nic_for_numa(topo, numa, static_cast<int>(r)));
      b.explanation = fmt::format("CPUs {} ({} of the node's {}), NIC {}", format_cpu_list(b.cpus), b.cpus.size(), c,
                                  b.nic.empty() ? "left alone (no RDMA NIC)" : b.nic);
    }
    return out;
  }
  if (mode == BindMode::kGpu) {
    std::vector<std::string> devices;  // CUDA_VISIBLE_DEVICES entries to hand out
    if (cuda_visible && !cuda_visible->empty()) {
      devices = split_list(*cuda_visible);
    } else {
      for (size_t i = 0; i < topo.gpus.size(); ++i) devices.push_back(std::to_string(i));
    }
    if (devices.empty()) {
      throw Error(ErrorCode::kInvalidUsage, "--bind gpu: this node has no NVIDIA GPU (use --bind numa or none)");
    }
    for (size_t r = 0; r < out.size(); ++r) {
      RankBinding& b = out[r];
      b.cuda_device = devices[r % devices.size()];
      const PciDevice* gpu = nullptr;
      if (all_digits(b.cuda_device)) {
        size_t idx = std::stoul(b.cuda_device);
        if (idx < topo.gpus.size()) gpu = &topo.gpus[idx];
      }
      if (!gpu) {
        b.explanation = fmt::format("GPU {} (locality unknown: CPUs and NIC left alone)", b.cuda_device);
        continue;
      }
      b.cpus = gpu->cpus;
      b.nic = nic_value(nic_for_gpu(topo, *gpu));
      b.explanation = fmt::format("GPU {} ({}), CPUs {}{}, NIC {}", b.cuda_device, gpu->bus_id,
                                  format_cpu_list(b.cpus),
                                  gpu->numa >= 0 ? fmt::format(" (NUMA node {})", topo.numa[gpu->numa].os_index) : "",
                                  b.nic.empty() ? "left alone (no RDMA NIC)" : b.nic);
    }
    return out;
  }
  // kNuma
  for (size_t r = 0; r < out.size(); ++r) {
    RankBinding& b = out[r];
    size_t n = r % topo.numa.size();
    b.cpus = topo.numa[n].cpus;
    b.nic = nic_value(nic_for_numa(topo, static_cast<int>(n), static_cast<int>(r)));
    b.explanation = fmt::format("NUMA node {}, CPUs {}, NIC {}", topo.numa[n].os_index, format_cpu_list(b.cpus),
                                b.nic.empty() ? "left alone (no RDMA NIC)" : b.nic);
  }
  return out;
}

}  // namespace weft::launcher
