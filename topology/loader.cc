// Format detection, file loading, WEFT_TOPO_FILE, XML checks and the fabric builder.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "topology/discovery.h"
#include "topology/reader_util.h"

namespace weft::topo {
namespace detail {

void parse_xml_checked(pugi::xml_document& doc, std::string_view xml, const std::string& source) {
  if (xml.size() > kMaxTopologyFileBytes)
    fail(ErrorCode::kInvalidArgument, "{}: topology file is {} bytes, more than the {} allowed", source,
         xml.size(), kMaxTopologyFileBytes);
  pugi::xml_parse_result r = doc.load_buffer(xml.data(), xml.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!r)
    fail(ErrorCode::kInvalidArgument, "{}: malformed XML: {} at offset {}", source, r.description(),
         static_cast<long long>(r.offset));
  // Iterative depth check (no recursion on hostile input).
  int depth = 0;
  pugi::xml_node n = doc.first_child();
  while (n) {
    if (n.first_child()) {
      n = n.first_child();
      if (++depth > kMaxXmlDepth)
        fail(ErrorCode::kInvalidArgument, "{}: XML nesting deeper than {} levels", source, kMaxXmlDepth);
      continue;
    }
    while (n && !n.next_sibling()) {
      n = n.parent();
      --depth;
      if (n == doc) return;
    }
    if (n) n = n.next_sibling();
  }
}

void FabricBuilder::add_direct(int a, int b, int links, double gbs) {
  const int n = static_cast<int>(direct_links_.size());
  if (a < 0 || b < 0 || a >= n || b >= n || a == b || links <= 0) return;
  direct_links_[a][b] = direct_links_[b][a] = std::max(direct_links_[a][b], links);
  direct_gbs_[a][b] = direct_gbs_[b][a] = std::max(direct_gbs_[a][b], gbs);
  any_ = true;
}

void FabricBuilder::add_switch_link(int gpu, int sw, int links, double gbs) {
  if (gpu < 0 || gpu >= static_cast<int>(direct_links_.size()) || links <= 0) return;
  switch_links_.push_back({gpu, sw, links, gbs});
  parent_.try_emplace(sw, sw);
  any_ = true;
}

int FabricBuilder::find(int sw) {
  auto it = parent_.try_emplace(sw, sw).first;
  int root = sw;
  for (int guard = 0; parent_[root] != root && guard < 1 << 20; ++guard) root = parent_[root];
  while (it->second != root) {
    int next = it->second;
    it->second = root;
    it = parent_.find(next);
  }
  return root;
}

void FabricBuilder::join_switches(int s1, int s2) {
  int a = find(s1), b = find(s2);
  if (a != b) parent_[a] = b;
}

void FabricBuilder::apply(NodeTopology& topo, Fabric fabric) {
  const size_t g = direct_links_.size();
  topo.gpu_links = direct_links_;
  topo.gpu_link_gbs = direct_gbs_;
  // Per GPU, the links and bandwidth into each switch component.
  std::vector<std::map<int, std::pair<int, double>>> into(g);
  for (const auto& l : switch_links_) {
    auto& e = into[l.gpu][find(l.sw)];
    e.first += l.links;
    e.second += l.gbs;
  }
  for (size_t i = 0; i < g; ++i)
    for (size_t j = 0; j < g; ++j) {
      if (i == j) continue;
      for (const auto& [comp, mine] : into[i]) {
        auto it = into[j].find(comp);
        if (it == into[j].end()) continue;
        topo.gpu_links[i][j] += std::min(mine.first, it->second.first);
        topo.gpu_link_gbs[i][j] += std::min(mine.second, it->second.second);
      }
    }
  if (any_) topo.fabric = fabric;
  topo.gpu_switch = !switch_links_.empty();
}

bool is_gpu_class(uint16_t class_id) {
  const int base = class_id >> 8;
  return base == 0x03 || base == 0x12;
}

GpuVendor gpu_vendor(uint16_t vendor) {
  if (vendor == 0x10de) return GpuVendor::kNvidia;
  if (vendor == 0x1002) return GpuVendor::kAmd;
  return GpuVendor::kUnknown;
}

}  // namespace detail

TopoFormat detect_format(std::string_view xml, const std::string& source) {
  pugi::xml_document doc;
  detail::parse_xml_checked(doc, xml, source);
  pugi::xml_node root = doc.document_element();
  std::string_view name = root.name();
  if (name == "topology") return TopoFormat::kHwloc;
  if (name == "system") return TopoFormat::kNccl;
  if (name.empty()) fail(ErrorCode::kInvalidArgument, "{}: no XML element found", source);
  fail(ErrorCode::kInvalidArgument,
       "{}: unknown topology format: root element <{}> (expected <topology> for hwloc XML or <system> "
       "for NCCL topology XML)",
       source, name.substr(0, 64));
}

NodeTopology read_topology_xml(std::string_view xml, const std::string& source) {
  return detect_format(xml, source) == TopoFormat::kHwloc ? read_hwloc_xml(xml, source)
                                                          : read_nccl_xml(xml, source);
}

NodeTopology load_topology_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::kSystemError, "cannot open topology file '{}': {}", path, std::strerror(errno));
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) fail(ErrorCode::kSystemError, "cannot read topology file '{}'", path);
  if (static_cast<size_t>(size) > kMaxTopologyFileBytes)
    fail(ErrorCode::kInvalidArgument, "topology file '{}' is {} bytes, more than the {} allowed", path,
         static_cast<long long>(size), kMaxTopologyFileBytes);
  in.seekg(0);
  std::string content(static_cast<size_t>(size), '\0');
  if (size > 0 && !in.read(content.data(), size))
    fail(ErrorCode::kSystemError, "cannot read topology file '{}'", path);
  if (content.find_first_not_of(" \t\r\n") == std::string::npos)
    fail(ErrorCode::kInvalidArgument, "topology file '{}' is empty", path);
  return read_topology_xml(content, path);
}

NodeTopology load_topology() {
  const char* file = std::getenv("WEFT_TOPO_FILE");
  if (file && *file) {
    WEFT_LOG_INFO("topology: reading WEFT_TOPO_FILE={}", file);
    return load_topology_file(file);
  }
  // One discovery at a time in a process: thread-ranks (and several communicators) may plan at
  // once, and hwloc's libudev keeps global state that two concurrent loads raced on (ThreadSanitizer,
  // Sweep with packed-trees schedules).
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  return discover_live();
}

}  // namespace weft::topo
