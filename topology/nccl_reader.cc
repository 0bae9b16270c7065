// NCCL topology XML (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE format) reader, with pugixml.
//   <system version=..><cpu numaid= affinity= arch= vendor=>
//     <pci busid= class= vendor= device= link_speed= link_width=>   (nested pci = switches)
//       <gpu dev= sm= rank= gdr=><nvlink|xgmi target= count= tclass=/></gpu>
//       <nic><net name= dev= speed= port= gdr=/></nic>
//     </pci> <nic>...</nic> (a NIC without PCI location) </cpu></system>
#include <hwloc.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <map>

#include "runtime/base/error.h"
#include "topology/discovery.h"
#include "topology/reader_util.h"

namespace weft::topo {
namespace {

class NcclReader {
 public:
  NcclReader(const std::string& source, NodeTopology& out) : source_(source), out_(out) {}

  void run(const pugi::xml_node& system) {
    int index = 0;
    for (pugi::xml_node cpu : system.children("cpu")) read_cpu(cpu, index++);
    if (index == 0) fail(ErrorCode::kInvalidArgument, "{}: NCCL topology has no <cpu> element", source_);
    resolve_links();
  }

 private:
  [[noreturn]] void bad(const pugi::xml_node& n, std::string_view what) {
    fail(ErrorCode::kInvalidArgument, "{}: NCCL topology <{}> at offset {}: {}", source_,
         std::string_view(n.name()).substr(0, 32), static_cast<long long>(n.offset_debug()), what);
  }

  // Integer attribute (decimal or 0x hex); fallback when absent or empty.
  long long number(const pugi::xml_node& n, const char* attr, long long fallback, int base = 10) {
    pugi::xml_attribute a = n.attribute(attr);
    std::string_view s = a ? a.value() : "";
    if (s.empty()) return fallback;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
      s.remove_prefix(2);
      base = 16;
    }
    long long v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
    if (ec != std::errc() || ptr != s.data() + s.size())
      bad(n, fmt::format("attribute {}=\"{}\" is not a number", attr, s.substr(0, 40)));
    return v;
  }

  // NCCL writes a CPU's affinity as Linux prints a cpumask (local_cpus in sysfs): 32-bit groups in
  // hex, most significant first, separated by commas. hwloc_bitmap_sscanf reads that format but
  // aborts on an assertion for some strings that are not in it (",ff": found by fuzz_topo_nccl),
  // so the reader checks the format first.
  static bool cpumask_format_ok(std::string_view s) {
    size_t digits = 0;
    for (char c : s) {
      if (c == ',') {
        if (digits == 0) return false;
        digits = 0;
      } else if (!std::isxdigit(static_cast<unsigned char>(c)) || ++digits > 8) {
        return false;
      }
    }
    return digits > 0;
  }

  void read_cpu(const pugi::xml_node& cpu, int index) {
    NumaNode numa;
    long long id = number(cpu, "numaid", index);
    if (id < 0 || id > (1 << 20)) bad(cpu, "numaid out of range");
    numa.os_index = static_cast<int>(id);
    numa.package = index;
    std::string_view aff = cpu.attribute("affinity").value();
    if (aff.size() > 8192) bad(cpu, "affinity attribute too long");
    if (!aff.empty()) {
      if (!cpumask_format_ok(aff))
        bad(cpu, "affinity is not a CPU mask (groups of up to 8 hex digits separated by commas, as Linux prints one)");
      hwloc_bitmap_t b = hwloc_bitmap_alloc();
      std::string s(aff);
      if (b && hwloc_bitmap_sscanf(b, s.c_str()) == 0 && hwloc_bitmap_weight(b) >= 0) {
        char* list = nullptr;
        if (hwloc_bitmap_list_asprintf(&list, b) >= 0 && list) numa.cpuset = list;
        std::free(list);
      }
      if (b) hwloc_bitmap_free(b);
    }
    out_.numas.push_back(numa);
    PciNode root;
    root.kind = PciKind::kCpu;
    root.numas = {static_cast<int>(out_.numas.size()) - 1};
    root.cpuset = numa.cpuset;
    out_.pci.push_back(root);
    // Every top-level PCI device of a <cpu> hangs off the CPU's root complex: two of them are PHB.
    PciNode hb;
    hb.kind = PciKind::kHostBridge;
    hb.parent = static_cast<int>(out_.pci.size()) - 1;
    out_.pci.push_back(hb);
    const int host = static_cast<int>(out_.pci.size()) - 1;

    // Iterative walk over nested <pci>.
    std::vector<std::pair<pugi::xml_node, int>> stack;
    for (pugi::xml_node c = cpu.last_child(); c; c = c.previous_sibling()) stack.emplace_back(c, host);
    while (!stack.empty()) {
      auto [n, parent] = stack.back();
      stack.pop_back();
      std::string_view name = n.name();
      if (name == "nic") {
        read_nic(n, parent, "");
      } else if (name == "pci") {
        const int me = read_pci(n, parent);
        for (pugi::xml_node c = n.last_child(); c; c = c.previous_sibling())
          if (std::string_view(c.name()) == "pci") stack.emplace_back(c, me);
      }
      if (out_.pci.size() > 200000) bad(n, "too many PCI elements");
    }
  }

  int read_pci(const pugi::xml_node& n, int parent) {
    auto busid = normalize_busid(n.attribute("busid").value());
    if (!busid) bad(n, fmt::format("missing or invalid busid \"{}\"", std::string_view(n.attribute("busid").value()).substr(0, 40)));
    PciNode p;
    p.parent = parent;
    p.busid = *busid;
    long long cls = number(n, "class", 0, 16);
    if (cls < 0 || cls > 0xffffff) bad(n, "class out of range");
    p.class_id = static_cast<uint16_t>(cls > 0xffff ? cls >> 8 : cls);
    p.vendor = static_cast<uint16_t>(number(n, "vendor", 0, 16) & 0xffff);
    p.device = static_cast<uint16_t>(number(n, "device", 0, 16) & 0xffff);
    long long width = number(n, "link_width", 0);
    if (width < 0 || width > 64) width = 0;
    p.link_gbs = pcie_gbs(parse_gts(n.attribute("link_speed").value()), static_cast<int>(width));
    const bool has_pci_child = static_cast<bool>(n.child("pci"));
    const bool bridge_class = (p.class_id >> 8) == 0x06 && (p.class_id & 0xff) == 0x04;
    p.kind = has_pci_child || bridge_class ? PciKind::kBridge : PciKind::kDevice;
    out_.pci.push_back(p);
    const int me = static_cast<int>(out_.pci.size()) - 1;
    if (p.kind == PciKind::kBridge) return me;

    pugi::xml_node gpu = n.child("gpu");
    pugi::xml_node nic = n.child("nic");
    const bool class_gpu = detail::is_gpu_class(p.class_id) &&
                           (p.vendor == 0 || detail::gpu_vendor(p.vendor) != GpuVendor::kUnknown);
    if (gpu || class_gpu) {
      Gpu g;
      g.pci = p.busid;
      g.vendor = detail::gpu_vendor(p.vendor);
      g.node = me;
      if (gpu) {
        long long dev = number(gpu, "dev", -1);
        if (dev >= 0 && dev < 1000000) g.os_name = fmt::format("dev{}", dev);
        long long sm = number(gpu, "sm", 0);
        if (g.vendor == GpuVendor::kUnknown) g.vendor = gpu.attribute("gcn") ? GpuVendor::kAmd : GpuVendor::kNvidia;
        for (pugi::xml_node l : gpu.children()) {
          std::string_view ln = l.name();
          if (ln != "nvlink" && ln != "xgmi") continue;
          auto target = normalize_busid(l.attribute("target").value());
          if (!target) bad(l, "missing or invalid target");
          long long count = number(l, "count", 1);
          if (count < 0 || count > 1024) bad(l, "count out of range");
          long long tclass = number(l, "tclass", 0, 16);
          links_.push_back({static_cast<int>(out_.gpus.size()), *target, static_cast<int>(count),
                            ln == "xgmi", tclass, sm});
        }
      }
      out_.gpus.push_back(std::move(g));
      if (out_.gpus.size() > 65536) bad(n, "too many GPUs");
    } else if (nic) {
      read_nic(nic, me, p.busid);
    } else if ((p.class_id >> 8) == 0x02 || p.class_id == 0) {
      // A network function without <nic> (AWS p4d EFA), or an unclassified leaf: NCCL files list
      // only GPUs and NICs, and the p5 file lists its EFA NICs this way.
      Nic x;
      x.name = p.busid;
      x.pci = p.busid;
      x.node = me;
      x.gbs = p.link_gbs;
      out_.nics.push_back(std::move(x));
    }
    return me;
  }

  void read_nic(const pugi::xml_node& nic, int node, const std::string& busid) {
    for (pugi::xml_node net : nic.children("net")) {
      Nic x;
      x.name = std::string(std::string_view(net.attribute("name").value()).substr(0, 256));
      if (x.name.empty()) x.name = busid.empty() ? fmt::format("net{}", out_.nics.size()) : busid;
      x.pci = busid;
      x.node = node;
      long long mbps = number(net, "speed", 0);
      if (mbps < 0 || mbps > 100000000) bad(net, "speed out of range");
      x.gbs = static_cast<double>(mbps) / 8000.0;
      if (x.gbs <= 0) x.gbs = out_.pci[node].link_gbs;
      out_.nics.push_back(std::move(x));
      if (out_.nics.size() > 65536) bad(net, "too many NICs");
    }
  }

  void resolve_links() {
    std::map<std::string, int> gpu_by_bus;
    for (size_t i = 0; i < out_.gpus.size(); ++i) gpu_by_bus.emplace(out_.gpus[i].pci, static_cast<int>(i));
    std::map<std::string, int> switch_ids;
    detail::FabricBuilder nv(out_.gpus.size()), xgmi(out_.gpus.size());
    for (const auto& l : links_) {
      if (l.target == out_.gpus[l.gpu].pci) continue;  // self-targeted (seen in hand-written files)
      const double per_link = l.xgmi ? detail::kXgmiGbsPerLink
                                     : (l.sm > 0 && l.sm < 70 ? detail::kNvlink1GbsPerLink : detail::kNvlinkGbsPerLink);
      auto& fb = l.xgmi ? xgmi : nv;
      auto it = gpu_by_bus.find(l.target);
      if (it != gpu_by_bus.end()) {
        fb.add_direct(l.gpu, it->second, l.count, l.count * per_link);
      } else if (!l.xgmi && (l.tclass == 0x068000 || l.tclass == 0x0680 || (l.tclass >> 16) == 0x06)) {
        // NVSwitch (or a switch NVML could not name): all NVSwitches form one fabric.
        switch_ids.emplace(l.target, static_cast<int>(switch_ids.size()));
        fb.add_switch_link(l.gpu, switch_ids[l.target], l.count, l.count * per_link);
        fb.join_switches(switch_ids[l.target], 0);
      }
    }
    if (!nv.empty()) nv.apply(out_, Fabric::kNVLink);
    else if (!xgmi.empty()) xgmi.apply(out_, Fabric::kXGMI);
  }

  struct Link {
    int gpu;
    std::string target;
    int count;
    bool xgmi;
    long long tclass;
    long long sm;
  };
  const std::string& source_;
  NodeTopology& out_;
  std::vector<Link> links_;
};

}  // namespace

NodeTopology read_nccl_xml(std::string_view xml, const std::string& source) {
  pugi::xml_document doc;
  detail::parse_xml_checked(doc, xml, source);
  pugi::xml_node root = doc.document_element();
  if (std::string_view(root.name()) != "system")
    fail(ErrorCode::kInvalidArgument, "{}: not an NCCL topology (root element <{}>, expected <system>)", source,
         std::string_view(root.name()).substr(0, 64));
  NodeTopology out;
  out.source = source;
  out.format = "nccl";
  NcclReader(source, out).run(root);
  finalize(out);
  return out;
}

}  // namespace weft::topo
