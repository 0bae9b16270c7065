#include "topology/model.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <numeric>

#include "runtime/base/error.h"

namespace weft::topo {

const char* path_class_name(PathClass c) {
  switch (c) {
    case PathClass::kSelf: return "X";
    case PathClass::kNV: return "NV";
    case PathClass::kPIX: return "PIX";
    case PathClass::kPXB: return "PXB";
    case PathClass::kPHB: return "PHB";
    case PathClass::kNODE: return "NODE";
    case PathClass::kSYS: return "SYS";
  }
  return "?";
}

std::optional<PathClass> parse_path_class(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(PathClass::kSYS); ++i) {
    auto c = static_cast<PathClass>(i);
    if (name == path_class_name(c)) return c;
  }
  if (name == "XGMI") return PathClass::kNV;
  return std::nullopt;
}

const char* fabric_name(Fabric f) {
  switch (f) {
    case Fabric::kNone: return "none";
    case Fabric::kNVLink: return "nvlink";
    case Fabric::kXGMI: return "xgmi";
  }
  return "?";
}

std::string Path::label() const {
  if (cls != PathClass::kNV) return path_class_name(cls);
  return fmt::format("{}{}", fabric == Fabric::kXGMI ? "XGMI" : "NV", links);
}

int root_of(const NodeTopology& topo, int node) {
  int steps = 0;
  const int n = static_cast<int>(topo.pci.size());
  while (node >= 0 && node < n && steps++ <= n) {
    if (topo.pci[node].kind == PciKind::kCpu) return node;
    node = topo.pci[node].parent;
  }
  return -1;
}

namespace {

int numa_of_node(const NodeTopology& topo, int node) {
  int root = root_of(topo, node);
  if (root < 0 || topo.pci[root].numas.empty()) return -1;
  return topo.pci[root].numas.front();
}

template <typename T>
void permute_matrix(std::vector<std::vector<T>>& m, const std::vector<size_t>& order) {
  std::vector<std::vector<T>> out(order.size(), std::vector<T>(order.size()));
  for (size_t i = 0; i < order.size(); ++i)
    for (size_t j = 0; j < order.size(); ++j) out[i][j] = m[order[i]][order[j]];
  m = std::move(out);
}

}  // namespace

void finalize(NodeTopology& topo) {
  const int n = static_cast<int>(topo.pci.size());
  for (int i = 0; i < n; ++i) {
    const auto& p = topo.pci[i];
    if (p.kind == PciKind::kCpu) {
      if (p.parent != -1) fail(ErrorCode::kInternalError, "topology: CPU root {} has a parent", i);
      for (int m : p.numas)
        if (m < 0 || m >= static_cast<int>(topo.numas.size()))
          fail(ErrorCode::kInternalError, "topology: CPU root {} names NUMA index {}", i, m);
    } else if (p.parent < 0 || p.parent >= n || p.parent == i) {
      fail(ErrorCode::kInvalidArgument, "topology: PCI node {} ({}) has no valid parent", i, p.busid);
    }
    if (p.kind != PciKind::kCpu && root_of(topo, i) < 0)
      fail(ErrorCode::kInvalidArgument, "topology: PCI node {} ({}) is not under a CPU", i, p.busid);
  }
  const size_t g = topo.gpus.size();
  for (const auto& gpu : topo.gpus)
    if (gpu.node < 0 || gpu.node >= n) fail(ErrorCode::kInternalError, "topology: GPU without PCI node");
  for (const auto& nic : topo.nics)
    if (nic.node < 0 || nic.node >= n) fail(ErrorCode::kInternalError, "topology: NIC without PCI node");
  topo.gpu_links.resize(g);
  topo.gpu_link_gbs.resize(g);
  for (size_t i = 0; i < g; ++i) {
    topo.gpu_links[i].resize(g, 0);
    topo.gpu_link_gbs[i].resize(g, 0.0);
  }
  std::vector<size_t> order(g);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = topo.gpus[a];
    const auto& y = topo.gpus[b];
    if (x.pci != y.pci) return x.pci < y.pci;
    return x.partition < y.partition;
  });
  std::vector<Gpu> gpus;
  gpus.reserve(g);
  for (size_t i : order) gpus.push_back(topo.gpus[i]);
  topo.gpus = std::move(gpus);
  permute_matrix(topo.gpu_links, order);
  permute_matrix(topo.gpu_link_gbs, order);
  bool any_link = false;
  for (size_t i = 0; i < g; ++i) {
    topo.gpu_links[i][i] = 0;
    topo.gpu_link_gbs[i][i] = 0;
    for (size_t j = 0; j < g; ++j) any_link = any_link || topo.gpu_links[i][j] > 0;
  }
  if (!any_link) topo.fabric = Fabric::kNone;

  std::stable_sort(topo.nics.begin(), topo.nics.end(), [](const Nic& a, const Nic& b) {
    if (a.pci.empty() != b.pci.empty()) return b.pci.empty();
    if (a.pci != b.pci) return a.pci < b.pci;
    return a.name < b.name;
  });
  for (auto& gpu : topo.gpus) gpu.numa = numa_of_node(topo, gpu.node);
  for (auto& nic : topo.nics) nic.numa = numa_of_node(topo, nic.node);
}

double parse_gts(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data() + i, text.data() + text.size(), value);
  if (ec != std::errc() || !std::isfinite(value) || value <= 0 || value > 1000) return 0;
  (void)ptr;
  return value;
}

double pcie_gbs(double gts, int width) {
  if (gts <= 0 || width <= 0 || width > 64) return 0;
  // Gen1/2 use 8b/10b encoding, Gen3+ 128b/130b.
  const double efficiency = gts < 8 ? 0.8 : 128.0 / 130.0;
  return gts * efficiency / 8.0 * width;
}

std::optional<std::string> normalize_busid(std::string_view text) {
  std::string s;
  // Accept "bb:dd.f" (domain 0) and "dddd:bb:dd.f" with any hex digit count per field.
  unsigned long fields[4] = {0, 0, 0, 0};
  int nf = 0;
  size_t start = 0;
  if (text.size() > 32 || text.empty()) return std::nullopt;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ':' || text[i] == '.') {
      if (nf >= 4 || i == start) return std::nullopt;
      auto [ptr, ec] = std::from_chars(text.data() + start, text.data() + i, fields[nf], 16);
      if (ec != std::errc() || ptr != text.data() + i) return std::nullopt;
      ++nf;
      start = i + 1;
    }
  }
  if (nf == 3) {
    fields[3] = fields[2];
    fields[2] = fields[1];
    fields[1] = fields[0];
    fields[0] = 0;
  } else if (nf != 4) {
    return std::nullopt;
  }
  if (fields[0] > 0xffff || fields[1] > 0xff || fields[2] > 0x1f || fields[3] > 0x7) return std::nullopt;
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", fields[0], fields[1], fields[2], fields[3]);
}

}  // namespace weft::topo
