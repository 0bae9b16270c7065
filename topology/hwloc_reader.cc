// hwloc-backed discovery: the live machine or an hwloc XML file (v1 or v2 format).
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "runtime/base/error.h"
#include "topology/discovery.h"
#include "topology/reader_util.h"

namespace weft::topo {
namespace {

class HwlocHandle {
 public:
  HwlocHandle() {
    if (hwloc_topology_init(&t_) != 0) fail(ErrorCode::kSystemError, "hwloc_topology_init failed");
    // I/O objects (and with them the NVLink/XGMI matrices) are dropped unless asked for, also on XML
    // import.
    hwloc_topology_set_io_types_filter(t_, HWLOC_TYPE_FILTER_KEEP_ALL);
  }
  ~HwlocHandle() { hwloc_topology_destroy(t_); }
  HwlocHandle(const HwlocHandle&) = delete;
  HwlocHandle& operator=(const HwlocHandle&) = delete;
  hwloc_topology_t get() const { return t_; }

 private:
  hwloc_topology_t t_ = nullptr;
};

std::string bitmap_list(hwloc_const_bitmap_t b) {
  if (!b) return "";
  char* s = nullptr;
  if (hwloc_bitmap_list_asprintf(&s, b) < 0 || !s) return "";
  std::string out(s);
  std::free(s);
  return out;
}

std::string busid_of(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& a) {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", static_cast<unsigned>(a.domain), static_cast<unsigned>(a.bus),
                     static_cast<unsigned>(a.dev), static_cast<unsigned>(a.func));
}

// Enum fields of objects imported from XML can hold any value; read them as integers (loading an
// out-of-range enum is undefined behaviour).
template <typename E>
int enum_value(const E& e) {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof v);
  return static_cast<int>(v);
}

int osdev_type(hwloc_obj_t o) { return enum_value(o->attr->osdev.type); }

bool is_pci_like(hwloc_obj_t o) { return o->type == HWLOC_OBJ_BRIDGE || o->type == HWLOC_OBJ_PCI_DEVICE; }

// "nvml0" -> "nvml", "opencl0d1" -> "opencl", "renderD128" -> "renderd".
std::string backend_key(const char* name) {
  std::string key;
  for (const char* p = name; p && *p && std::isalpha(static_cast<unsigned char>(*p)); ++p)
    key.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(*p))));
  return key;
}

// Natural order: "rsmi2" < "rsmi10".
bool natural_less(const std::string& a, const std::string& b) {
  if (a.size() != b.size() && backend_key(a.c_str()) == backend_key(b.c_str())) return a.size() < b.size();
  return a < b;
}

int backend_rank(const std::string& key) {
  static const char* const kOrder[] = {"nvml", "rsmi", "cuda", "opencl", "card", "renderd"};
  for (int i = 0; i < 6; ++i)
    if (key == kOrder[i]) return i;
  return 6;
}

int nvlink_count(double mbs) {
  if (mbs <= 0) return 0;
  const long long v = std::llround(std::min(mbs, 1e9));
  if (v % 25000 == 0) return static_cast<int>(v / 25000);
  if (v % 20000 == 0) return static_cast<int>(v / 20000);
  return static_cast<int>(std::max<long long>(1, std::llround(static_cast<double>(v) / 25000.0)));
}

int xgmi_count(double value) {
  if (value <= 0) return 0;
  return static_cast<int>(std::max<long long>(1, std::llround(std::min(value, 1e9) / 100000.0)));
}

class Builder {
 public:
  Builder(hwloc_topology_t t, NodeTopology& out) : t_(t), out_(out) {}

  void run() {
    read_numa();
    read_gpus();
    read_nics();
    read_fabric("NVLinkBandwidth", Fabric::kNVLink);
    read_fabric("XGMIBandwidth", Fabric::kXGMI);
    hwloc_obj_t root = hwloc_get_root_obj(t_);
    if (const char* h = root ? hwloc_obj_get_info_by_name(root, "HostName") : nullptr) out_.hostname = h;
  }

 private:
  void read_numa() {
    for (hwloc_obj_t o = hwloc_get_next_obj_by_type(t_, HWLOC_OBJ_NUMANODE, nullptr); o;
         o = hwloc_get_next_obj_by_type(t_, HWLOC_OBJ_NUMANODE, o)) {
      NumaNode n;
      n.os_index = o->os_index == HWLOC_UNKNOWN_INDEX ? static_cast<int>(o->logical_index)
                                                       : static_cast<int>(o->os_index);
      hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t_, HWLOC_OBJ_PACKAGE, o);
      n.package = pkg ? static_cast<int>(pkg->logical_index) : -1;
      n.cpuset = bitmap_list(o->cpuset);
      numa_objs_.push_back(o);
      out_.numas.push_back(std::move(n));
    }
  }

  int cpu_root(hwloc_obj_t o) {
    auto it = node_of_.find(o);
    if (it != node_of_.end()) return it->second;
    PciNode n;
    n.kind = PciKind::kCpu;
    n.cpuset = bitmap_list(o->cpuset);
    for (size_t i = 0; i < numa_objs_.size(); ++i)
      if (o->nodeset && hwloc_bitmap_isset(o->nodeset, numa_objs_[i]->os_index)) n.numas.push_back(static_cast<int>(i));
    out_.pci.push_back(std::move(n));
    return node_of_[o] = static_cast<int>(out_.pci.size()) - 1;
  }

  // The PciNode for a bridge or PCI device, creating its ancestors first (iteratively).
  int pci_node(hwloc_obj_t o) {
    std::vector<hwloc_obj_t> chain;
    hwloc_obj_t p = o;
    while (p && is_pci_like(p) && !node_of_.count(p)) {
      chain.push_back(p);
      p = p->parent;
      if (chain.size() > 4096) fail(ErrorCode::kInvalidArgument, "hwloc: PCI tree deeper than 4096 levels");
    }
    if (!p) fail(ErrorCode::kInvalidArgument, "hwloc: I/O object without a CPU-side ancestor");
    int parent = node_of_.count(p) ? node_of_[p] : cpu_root(p);
    for (auto ci = chain.rbegin(); ci != chain.rend(); ++ci) {
      hwloc_obj_t c = *ci;
      PciNode n;
      n.parent = parent;
      const hwloc_obj_attr_u::hwloc_pcidev_attr_s* pa = nullptr;
      if (c->type == HWLOC_OBJ_BRIDGE) {
        const bool host = enum_value(c->attr->bridge.upstream_type) == HWLOC_OBJ_BRIDGE_HOST;
        n.kind = host ? PciKind::kHostBridge : PciKind::kBridge;
        if (!host) pa = &c->attr->bridge.upstream.pci;
      } else {
        n.kind = PciKind::kDevice;
        pa = &c->attr->pcidev;
      }
      if (pa) {
        n.busid = busid_of(*pa);
        n.class_id = pa->class_id;
        n.vendor = pa->vendor_id;
        n.device = pa->device_id;
        n.link_gbs = std::isfinite(pa->linkspeed) && pa->linkspeed > 0 ? pa->linkspeed : 0.0;
      }
      out_.pci.push_back(std::move(n));
      parent = node_of_[c] = static_cast<int>(out_.pci.size()) - 1;
    }
    return parent;
  }

  void read_gpus() {
    // PCI function -> backend key -> OS devices.
    std::map<hwloc_obj_t, std::map<std::string, std::vector<hwloc_obj_t>>> by_pci;
    std::vector<hwloc_obj_t> pci_order;
    for (hwloc_obj_t o = hwloc_get_next_osdev(t_, nullptr); o; o = hwloc_get_next_osdev(t_, o)) {
      const int type = osdev_type(o);
      if (type != HWLOC_OBJ_OSDEV_GPU && type != HWLOC_OBJ_OSDEV_COPROC) continue;
      hwloc_obj_t dev = o->parent;
      if (!dev || dev->type != HWLOC_OBJ_PCI_DEVICE) continue;
      const auto& a = dev->attr->pcidev;
      if (!detail::is_gpu_class(a.class_id) || detail::gpu_vendor(a.vendor_id) == GpuVendor::kUnknown) continue;
      if (!by_pci.count(dev)) pci_order.push_back(dev);
      by_pci[dev][backend_key(o->name)].push_back(o);
    }
    for (hwloc_obj_t dev : pci_order) {
      auto& groups = by_pci[dev];
      size_t count = 0;
      const std::vector<hwloc_obj_t>* names = nullptr;
      for (auto& [key, objs] : groups) {
        std::sort(objs.begin(), objs.end(), [](hwloc_obj_t x, hwloc_obj_t y) {
          return natural_less(x->name ? x->name : "", y->name ? y->name : "");
        });
        count = std::max(count, objs.size());
      }
      int best_rank = 1 << 30;
      for (auto& [key, objs] : groups)
        if (objs.size() == count && backend_rank(key) < best_rank) {
          best_rank = backend_rank(key);
          names = &objs;
        }
      const int node = pci_node(dev);
      const int base = static_cast<int>(out_.gpus.size());
      for (size_t k = 0; k < count; ++k) {
        Gpu g;
        g.pci = busid_of(dev->attr->pcidev);
        g.os_name = names && (*names)[k]->name ? (*names)[k]->name : "";
        g.vendor = detail::gpu_vendor(dev->attr->pcidev.vendor_id);
        g.node = node;
        g.partition = static_cast<int>(k);
        out_.gpus.push_back(std::move(g));
      }
      for (auto& [key, objs] : groups)
        for (size_t k = 0; k < objs.size() && k < count; ++k) gpu_of_obj_[objs[k]] = base + static_cast<int>(k);
    }
    if (!out_.gpus.empty()) return;
    // No GPU OS devices at all (e.g. exported without the CUDA/NVML backends): PCI class + vendor.
    for (hwloc_obj_t dev = hwloc_get_next_pcidev(t_, nullptr); dev; dev = hwloc_get_next_pcidev(t_, dev)) {
      const auto& a = dev->attr->pcidev;
      if (!detail::is_gpu_class(a.class_id) || detail::gpu_vendor(a.vendor_id) == GpuVendor::kUnknown) continue;
      Gpu g;
      g.pci = busid_of(a);
      g.vendor = detail::gpu_vendor(a.vendor_id);
      g.node = pci_node(dev);
      gpu_of_obj_[dev] = static_cast<int>(out_.gpus.size());
      out_.gpus.push_back(std::move(g));
    }
    if (!out_.gpus.empty()) out_.notes.push_back("GPUs found by PCI class only (no GPU OS devices)");
  }

  void add_nic(hwloc_obj_t dev, const std::string& name) {
    Nic n;
    n.name = name;
    n.pci = busid_of(dev->attr->pcidev);
    n.node = pci_node(dev);
    n.gbs = out_.pci[n.node].link_gbs;
    out_.nics.push_back(std::move(n));
  }

  void read_nics() {
    // 1. RDMA devices (OpenFabrics: mlx5_0, hfi1_0, EFA rdmap*).
    for (hwloc_obj_t o = hwloc_get_next_osdev(t_, nullptr); o; o = hwloc_get_next_osdev(t_, o)) {
      if (osdev_type(o) != HWLOC_OBJ_OSDEV_OPENFABRICS || !o->name) continue;
      if (o->parent && o->parent->type == HWLOC_OBJ_PCI_DEVICE) add_nic(o->parent, o->name);
    }
    if (!out_.nics.empty()) return;
    // 2. Network devices on network-class PCI functions (Slingshot hsiN, eth0), one per function.
    std::vector<std::pair<hwloc_obj_t, std::string>> cand;
    std::set<hwloc_obj_t> seen;
    for (hwloc_obj_t o = hwloc_get_next_osdev(t_, nullptr); o; o = hwloc_get_next_osdev(t_, o)) {
      if (osdev_type(o) != HWLOC_OBJ_OSDEV_NETWORK || !o->name) continue;
      hwloc_obj_t dev = o->parent;
      if (!dev || dev->type != HWLOC_OBJ_PCI_DEVICE || (dev->attr->pcidev.class_id >> 8) != 0x02) continue;
      if (seen.insert(dev).second) cand.emplace_back(dev, o->name);
    }
    // 3. Without any NIC OS device: InfiniBand / Ethernet PCI functions by class.
    if (cand.empty())
      for (hwloc_obj_t dev = hwloc_get_next_pcidev(t_, nullptr); dev; dev = hwloc_get_next_pcidev(t_, dev)) {
        uint16_t c = dev->attr->pcidev.class_id;
        if (c == 0x0207 || c == 0x0200) cand.emplace_back(dev, busid_of(dev->attr->pcidev));
      }
    // Management ports (1 GbE next to 200 Gb/s fabric NICs) are not collective rails.
    float fastest = 0;
    for (auto& [dev, name] : cand) fastest = std::max(fastest, dev->attr->pcidev.linkspeed);
    for (auto& [dev, name] : cand) {
      float s = dev->attr->pcidev.linkspeed;
      if (s > 0 && s < fastest / 4) {
        out_.notes.push_back(fmt::format("NIC {} skipped: PCIe link {:.1f} GB/s, fastest NIC {:.1f} GB/s", name, s, fastest));
        continue;
      }
      add_nic(dev, name);
    }
  }

  // -1: not a GPU; else GPU index.
  int gpu_index(hwloc_obj_t o) const {
    auto it = gpu_of_obj_.find(o);
    return it == gpu_of_obj_.end() ? -1 : it->second;
  }

  static bool is_switch(hwloc_obj_t o) {
    if (o->type != HWLOC_OBJ_PCI_DEVICE) return false;
    if (o->subtype && std::string_view(o->subtype) == "NVSwitch") return true;
    return o->attr->pcidev.vendor_id == 0x10de && o->attr->pcidev.class_id == 0x0680;
  }

  void read_fabric(const char* name, Fabric fabric) {
    unsigned nr = 0;
    if (hwloc_distances_get_by_name(t_, name, &nr, nullptr, 0) != 0 || nr == 0) return;
    std::vector<hwloc_distances_s*> dists(nr, nullptr);
    if (hwloc_distances_get_by_name(t_, name, &nr, dists.data(), 0) != 0) return;
    detail::FabricBuilder fb(out_.gpus.size());
    for (unsigned k = 0; k < nr && k < dists.size(); ++k) {
      hwloc_distances_s* d = dists[k];
      if (!d) continue;
      const unsigned n = d->nbobjs;
      std::vector<int> gpu(n, -1);
      std::vector<bool> sw(n, false);
      int first_switch = -1;
      for (unsigned i = 0; i < n; ++i) {
        if (!d->objs[i]) continue;
        gpu[i] = gpu_index(d->objs[i]);
        sw[i] = gpu[i] < 0 && is_switch(d->objs[i]);
        // The NVSwitches of one node form one fabric (DGX-2 baseboards are bridged, but NVML does
        // not report switch-to-switch links).
        if (sw[i] && first_switch < 0) first_switch = static_cast<int>(i);
        if (sw[i]) fb.join_switches(first_switch, static_cast<int>(i));
      }
      for (unsigned i = 0; i < n; ++i)
        for (unsigned j = 0; j < n; ++j) {
          if (i == j) continue;
          const double v = static_cast<double>(d->values[static_cast<size_t>(i) * n + j]);
          if (v <= 0) continue;
          const int links = fabric == Fabric::kNVLink ? nvlink_count(v) : xgmi_count(v);
          const double gbs = fabric == Fabric::kNVLink ? std::min(v, 1e9) / 1000.0 : links * detail::kXgmiGbsPerLink;
          if (gpu[i] >= 0 && gpu[j] >= 0) {
            fb.add_direct(gpu[i], gpu[j], links, gbs);
          } else if (gpu[i] >= 0 && sw[j]) {
            fb.add_switch_link(gpu[i], static_cast<int>(j), links, gbs);
          } else if (sw[i] && sw[j]) {
            fb.join_switches(static_cast<int>(i), static_cast<int>(j));
          }
        }
      hwloc_distances_release(t_, d);
    }
    if (!fb.empty() && out_.fabric == Fabric::kNone) fb.apply(out_, fabric);
  }

  hwloc_topology_t t_;
  NodeTopology& out_;
  std::vector<hwloc_obj_t> numa_objs_;
  std::map<hwloc_obj_t, int> node_of_;
  std::map<hwloc_obj_t, int> gpu_of_obj_;
};

NodeTopology build(hwloc_topology_t t, std::string source, std::string format) {
  NodeTopology out;
  out.source = std::move(source);
  out.format = std::move(format);
  Builder(t, out).run();
  finalize(out);
  return out;
}

}  // namespace

NodeTopology discover_live() {
  HwlocHandle h;
  if (hwloc_topology_load(h.get()) != 0) fail_errno("hwloc_topology_load");
  NodeTopology topo = build(h.get(), "live", "live");
  if (topo.hostname.empty()) {
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) == 0) topo.hostname = host;
  }
  return topo;
}

namespace {

// hwloc hands the buffer to libxml2 or its own parser, both stricter than pugixml about the XML
// declaration; hwloc 2.9 then crashes on some files they refuse (fuzzing found
// `<?xml encoding="U"?>`: no version, unknown encoding). Require a well-formed declaration, if any.
void check_xml_declaration(std::string_view xml, const std::string& source) {
  size_t i = 0;
  if (xml.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // UTF-8 byte order mark
  while (i < xml.size() && (xml[i] == ' ' || xml[i] == '\t' || xml[i] == '\r' || xml[i] == '\n')) ++i;
  if (xml.substr(i, 5) != "<?xml") return;
  const size_t end = xml.find("?>", i);
  const std::string_view decl = xml.substr(i + 5, end == std::string_view::npos ? 0 : end - i - 5);
  auto value = [&](std::string_view key) -> std::optional<std::string> {
    const size_t k = decl.find(key);
    if (k == std::string_view::npos) return std::nullopt;
    size_t q = k + key.size();
    while (q < decl.size() && (decl[q] == ' ' || decl[q] == '=')) ++q;
    if (q >= decl.size() || (decl[q] != '"' && decl[q] != '\'')) return std::string();
    const size_t close = decl.find(decl[q], q + 1);
    if (close == std::string_view::npos) return std::string();
    std::string v(decl.substr(q + 1, close - q - 1));
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return v;
  };
  const auto version = value("version"), encoding = value("encoding");
  const bool ok = end != std::string_view::npos && version && version->rfind("1.", 0) == 0 &&
                  (!encoding || *encoding == "utf-8" || *encoding == "us-ascii" || *encoding == "iso-8859-1");
  if (!ok)
    fail(ErrorCode::kInvalidArgument,
         "{}: malformed XML declaration (it needs version=\"1.x\" and, if any, encoding UTF-8, US-ASCII or ISO-8859-1)",
         source);
}

}  // namespace

// hwloc's bitmap text: comma-separated 32-bit chunks, most significant first, each "0x" and hex
// digits or empty (a zero chunk: "0x00000001,,0x00010000"), optionally led by "0xf...f," (the
// bits above are set; "0xf...f" alone: all set). hwloc 2.9's own parser counts the chunks from the
// second character on and asserts when there are more, so a set whose first chunk is empty
// (",x0000", "0xf...f,,0x1") aborts the process (fuzzing); a set must have this shape before
// hwloc_bitmap_sscanf sees it.
static bool hwloc_bitmap_text(std::string_view t) {
  constexpr std::string_view kInfinite = "0xf...f";
  if (t.substr(0, kInfinite.size()) == kInfinite) {
    t.remove_prefix(kInfinite.size());
    if (t.empty()) return true;
    if (t.front() != ',') return false;
    t.remove_prefix(1);
  }
  for (bool first = true;; first = false) {
    const size_t comma = t.find(',');
    const std::string_view chunk = t.substr(0, comma);
    if (chunk.empty()) {
      if (first) return false;
    } else {
      if (chunk.size() < 3 || chunk.size() > 18 || chunk[0] != '0' || (chunk[1] != 'x' && chunk[1] != 'X')) return false;
      for (char c : chunk.substr(2))
        if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    }
    if (comma == std::string_view::npos) return true;
    t.remove_prefix(comma + 1);
  }
}

NodeTopology read_hwloc_xml(std::string_view xml, const std::string& source) {
  pugi::xml_document doc;
  detail::parse_xml_checked(doc, xml, source);
  check_xml_declaration(xml, source);
  pugi::xml_node root = doc.document_element();
  if (std::string_view(root.name()) != "topology")
    fail(ErrorCode::kInvalidArgument, "{}: not hwloc XML (root element <{}>)", source, std::string_view(root.name()).substr(0, 64));
  std::string_view version = root.attribute("version").value();
  if (!version.empty() && version != "2.0" && version.substr(0, 2) != "1." && version.substr(0, 2) != "2.")
    fail(ErrorCode::kInvalidArgument,
         "{}: hwloc XML version {} is not supported: this build uses hwloc {} which reads versions 1.x and 2.x "
         "(export the file with hwloc 2.x, e.g. lstopo --of xml)",
         source, version.substr(0, 16), HWLOC_VERSION);
  // hwloc 2.9 dereferences the root object's complete sets without checking (it crashes on files
  // that lack them), so require them here.
  pugi::xml_node machine = root.child("object");
  if (!machine)
    fail(ErrorCode::kInvalidArgument, "{}: hwloc XML has no root <object>", source);
  // The same holds for every CPU-side object: hwloc compares their sets without NULL checks.
  std::vector<pugi::xml_node> stack{machine};
  while (!stack.empty()) {
    pugi::xml_node o = stack.back();
    stack.pop_back();
    std::string_view type = o.attribute("type").value();
    const bool io = type == "Bridge" || type == "PCIDev" || type == "OSDev" || type == "Misc";
    if (!io || o == machine) {
      for (const char* attr : {"cpuset", "complete_cpuset", "nodeset", "complete_nodeset"})
        if (!o.attribute(attr))
          fail(ErrorCode::kInvalidArgument, "{}: hwloc XML object of type '{}' at offset {} lacks the '{}' attribute",
               source, type.substr(0, 32), static_cast<long long>(o.offset_debug()), attr);
      // ... and trusts that each set is part of its complete set (fuzzing found crashes on an
      // empty or unparsable complete_cpuset).
      for (auto [part, whole] : {std::pair{"cpuset", "complete_cpuset"}, std::pair{"nodeset", "complete_nodeset"}}) {
        if (!hwloc_bitmap_text(o.attribute(part).value()) || !hwloc_bitmap_text(o.attribute(whole).value()))
          fail(ErrorCode::kInvalidArgument,
               "{}: hwloc XML object of type '{}' at offset {}: '{}' or '{}' is not a bitmap (comma-separated "
               "chunks of 0x and hex digits, the first not empty)", source, type.substr(0, 32), static_cast<long long>(o.offset_debug()), part, whole);
        hwloc_bitmap_t a = hwloc_bitmap_alloc(), b = hwloc_bitmap_alloc();
        const bool parsed = a && b && hwloc_bitmap_sscanf(a, o.attribute(part).value()) == 0 &&
                            hwloc_bitmap_sscanf(b, o.attribute(whole).value()) == 0;
        const bool included = parsed && hwloc_bitmap_isincluded(a, b);
        hwloc_bitmap_free(a);
        hwloc_bitmap_free(b);
        if (!included)
          fail(ErrorCode::kInvalidArgument,
               "{}: hwloc XML object of type '{}' at offset {}: '{}' is not a bitmap inside '{}'", source,
               type.substr(0, 32), static_cast<long long>(o.offset_debug()), part, whole);
      }
    }
    for (pugi::xml_node c : o.children("object")) stack.push_back(c);
  }
  HwlocHandle h;
  std::string buf(xml);  // NUL-terminated copy; hwloc wants the size including the NUL
  if (hwloc_topology_set_xmlbuffer(h.get(), buf.c_str(), static_cast<int>(buf.size() + 1)) != 0)
    fail(ErrorCode::kInvalidArgument, "{}: hwloc rejected the XML buffer", source);
  if (hwloc_topology_load(h.get()) != 0)
    fail(ErrorCode::kInvalidArgument, "{}: hwloc could not import the XML topology (invalid or inconsistent content)", source);
  return build(h.get(), source, "hwloc");
}

}  // namespace weft::topo
