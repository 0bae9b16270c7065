#include "topology/summary.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "runtime/base/error.h"
#include "topology/paths.h"
#include "topology/ring.h"

namespace weft::topo {

int NodeSummary::nic_index(const std::string& id) const {
  for (int i = 0; i < num_nics(); ++i)
    if (nics[i].id == id) return i;
  return -1;
}

namespace {

// Names from files are untrusted: keep printable ASCII (JSON needs valid UTF-8), at most 256 bytes.
std::string clean(std::string_view in) {
  std::string out;
  for (char c : in.substr(0, 256)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return out;
}

}  // namespace

NodeSummary summarize(const NodeTopology& topo) {
  NodeSummary s;
  s.hostname = clean(topo.hostname);
  s.source = clean(topo.source);
  s.fabric = topo.fabric;
  s.gpu_switch = topo.gpu_switch && topo.fabric != Fabric::kNone;
  for (const auto& n : topo.numas) s.numa_nodes.push_back({n.os_index, n.package, n.cpuset});
  auto numa_os = [&](int idx) { return idx >= 0 && idx < static_cast<int>(topo.numas.size()) ? topo.numas[idx].os_index : -1; };
  auto cpuset_of = [&](int node) {
    int r = root_of(topo, node);
    return r >= 0 ? topo.pci[r].cpuset : std::string();
  };
  std::set<std::string> used;
  for (size_t i = 0; i < topo.gpus.size(); ++i) {
    const auto& g = topo.gpus[i];
    DeviceInfo d{fmt::format("GPU{}", i), g.pci, numa_os(g.numa), clean(g.os_name), cpuset_of(g.node), 0};
    used.insert(d.id);
    s.gpus.push_back(std::move(d));
  }
  for (const auto& n : topo.nics) {
    const std::string name = clean(n.name);
    std::string id = name;
    for (int k = 2; used.count(id); ++k) id = fmt::format("{}#{}", name, k);
    used.insert(id);
    s.nics.push_back({id, n.pci, numa_os(n.numa), name, cpuset_of(n.node), n.gbs});
  }
  s.paths = path_matrix(topo);
  std::vector<std::vector<PathClass>> classes(s.gpus.size());
  std::vector<double> speeds;
  for (const auto& n : s.nics) speeds.push_back(n.gbs);
  for (int g = 0; g < s.num_gpus(); ++g)
    for (int k = 0; k < s.num_nics(); ++k) classes[g].push_back(s.gpu_nic(g, k).cls);
  s.nic_for_gpu = assign_nearest_nics(classes, speeds);
  std::vector<std::vector<double>> w(s.gpus.size(), std::vector<double>(s.gpus.size(), 0));
  for (int a = 0; a < s.num_gpus(); ++a)
    for (int b = 0; b < s.num_gpus(); ++b) w[a][b] = ring_edge_weight(s.gpu_gpu(a, b));
  s.ring = best_ring(w).order;
  return s;
}

std::vector<Binding> default_bindings(const NodeSummary& s, int local_size) {
  std::vector<Binding> out(std::max(0, local_size));
  if (local_size <= 0) return out;
  if (s.num_gpus() > 0) {
    for (int r = 0; r < local_size; ++r) {
      Binding& b = out[r];
      b.gpu = r % s.num_gpus();
      int nic = b.gpu < static_cast<int>(s.nic_for_gpu.size()) ? s.nic_for_gpu[b.gpu] : -1;
      if (nic >= 0) b.nic = s.nics[nic].id;
      b.numa = s.gpus[b.gpu].numa;
    }
    return out;
  }
  const int numas = static_cast<int>(s.numa_nodes.size());
  std::vector<std::vector<PathClass>> classes(local_size);
  std::vector<double> speeds;
  for (const auto& n : s.nics) speeds.push_back(n.gbs);
  for (int r = 0; r < local_size; ++r) {
    out[r].numa = numas > 0 ? s.numa_nodes[static_cast<size_t>(r) * numas / local_size].os_index : -1;
    for (const auto& n : s.nics)
      classes[r].push_back(out[r].numa < 0 || n.numa < 0 || n.numa == out[r].numa ? PathClass::kNODE : PathClass::kSYS);
  }
  auto nic = assign_nearest_nics(classes, speeds);
  for (int r = 0; r < local_size; ++r)
    if (nic[r] >= 0) out[r].nic = s.nics[nic[r]].id;
  return out;
}

Binding default_binding(const NodeSummary& s, int local_rank, int local_size) {
  require(local_rank >= 0 && local_rank < local_size, "default_binding: local rank {} of {}", local_rank, local_size);
  return default_bindings(s, local_size)[local_rank];
}

namespace {

nlohmann::json device_json(const DeviceInfo& d, bool nic) {
  nlohmann::json j{{"id", d.id}, {"pci", d.pci}, {"numa", d.numa}, {"cpuset", d.cpuset}};
  if (nic) j["speed_gbs"] = d.gbs;
  else j["os_name"] = d.os_name;
  return j;
}

DeviceInfo device_from(const nlohmann::json& j, bool nic) {
  DeviceInfo d;
  d.id = j.at("id").get<std::string>();
  d.pci = j.value("pci", "");
  d.numa = j.value("numa", -1);
  d.cpuset = j.value("cpuset", "");
  if (nic) {
    d.gbs = j.value("speed_gbs", 0.0);
    d.os_name = d.id;
  } else {
    d.os_name = j.value("os_name", "");
  }
  return d;
}

Path parse_label(const std::string& label) {
  Path p;
  std::string_view v = label;
  int prefix = v.starts_with("XGMI") ? 4 : (v.starts_with("NV") ? 2 : 0);
  if (prefix > 0) {
    int links = 0;
    auto [ptr, ec] = std::from_chars(v.data() + prefix, v.data() + v.size(), links);
    if (ec != std::errc() || ptr != v.data() + v.size() || links < 0)
      fail(ErrorCode::kInvalidArgument, "topology JSON: bad path label '{}'", label);
    p.cls = PathClass::kNV;
    p.links = links;
    p.fabric = prefix == 4 ? Fabric::kXGMI : Fabric::kNVLink;
    return p;
  }
  auto c = parse_path_class(v);
  if (!c) fail(ErrorCode::kInvalidArgument, "topology JSON: bad path label '{}'", label);
  p.cls = *c;
  return p;
}

}  // namespace

nlohmann::json to_json(const NodeSummary& s) {
  nlohmann::json j;
  j["hostname"] = s.hostname;
  j["source"] = s.source;
  j["fabric"] = fabric_name(s.fabric);
  if (s.gpu_switch) j["gpu_switch"] = true;
  j["numa_nodes"] = nlohmann::json::array();
  for (const auto& n : s.numa_nodes) j["numa_nodes"].push_back({{"os_index", n.os_index}, {"package", n.package}, {"cpuset", n.cpuset}});
  j["gpus"] = nlohmann::json::array();
  for (const auto& g : s.gpus) j["gpus"].push_back(device_json(g, false));
  j["nics"] = nlohmann::json::array();
  for (const auto& n : s.nics) j["nics"].push_back(device_json(n, true));
  j["paths"] = nlohmann::json::object();
  j["path_gbs"] = nlohmann::json::object();
  for (int a = 0; a < s.num_devices(); ++a)
    for (int b = 0; b < s.num_devices(); ++b) {
      if (a == b) continue;
      j["paths"][s.device_id(a)][s.device_id(b)] = s.paths[a][b].label();
      j["path_gbs"][s.device_id(a)][s.device_id(b)] = s.paths[a][b].gbs;
    }
  j["nic_for_gpu"] = nlohmann::json::object();
  for (int g = 0; g < s.num_gpus(); ++g) {
    int n = g < static_cast<int>(s.nic_for_gpu.size()) ? s.nic_for_gpu[g] : -1;
    j["nic_for_gpu"][s.gpus[g].id] = n >= 0 ? nlohmann::json(s.nics[n].id) : nlohmann::json(nullptr);
  }
  j["ring"] = nlohmann::json::array();
  for (int g : s.ring) j["ring"].push_back(s.gpus.at(g).id);
  return j;
}

nlohmann::json report_json(const NodeSummary& s) { return to_json(s); }

NodeSummary summary_from_json(const nlohmann::json& j) {
  try {
    NodeSummary s;
    s.hostname = j.value("hostname", "");
    s.source = j.value("source", "");
    std::string fabric = j.value("fabric", "none");
    s.fabric = fabric == "nvlink" ? Fabric::kNVLink : fabric == "xgmi" ? Fabric::kXGMI : Fabric::kNone;
    s.gpu_switch = j.value("gpu_switch", false);
    for (const auto& n : j.at("numa_nodes"))
      s.numa_nodes.push_back({n.at("os_index").get<int>(), n.value("package", -1), n.value("cpuset", "")});
    for (const auto& g : j.at("gpus")) s.gpus.push_back(device_from(g, false));
    for (const auto& n : j.at("nics")) s.nics.push_back(device_from(n, true));
    const int d = s.num_devices();
    s.paths.assign(d, std::vector<Path>(d));
    const auto& paths = j.at("paths");
    const auto& gbs = j.contains("path_gbs") ? j.at("path_gbs") : nlohmann::json::object();
    for (int a = 0; a < d; ++a)
      for (int b = 0; b < d; ++b) {
        if (a == b) {
          s.paths[a][b] = Path{PathClass::kSelf, Fabric::kNone, 0, 0};
          continue;
        }
        s.paths[a][b] = parse_label(paths.at(s.device_id(a)).at(s.device_id(b)).get<std::string>());
        if (gbs.contains(s.device_id(a)) && gbs[s.device_id(a)].contains(s.device_id(b)))
          s.paths[a][b].gbs = gbs[s.device_id(a)][s.device_id(b)].get<double>();
      }
    s.nic_for_gpu.assign(s.gpus.size(), -1);
    if (j.contains("nic_for_gpu"))
      for (int g = 0; g < s.num_gpus(); ++g) {
        const auto& v = j["nic_for_gpu"].value(s.gpus[g].id, nlohmann::json(nullptr));
        if (v.is_string()) s.nic_for_gpu[g] = s.nic_index(v.get<std::string>());
      }
    if (j.contains("ring"))
      for (const auto& id : j["ring"]) {
        const std::string name = id.get<std::string>();
        auto it = std::find_if(s.gpus.begin(), s.gpus.end(), [&](const DeviceInfo& x) { return x.id == name; });
        if (it == s.gpus.end()) fail(ErrorCode::kInvalidArgument, "topology JSON: ring names unknown GPU '{}'", name);
        s.ring.push_back(static_cast<int>(it - s.gpus.begin()));
      }
    return s;
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kInvalidArgument, "topology JSON: {}", e.what());
  }
}

nlohmann::json to_json(const Binding& b) { return {{"gpu", b.gpu}, {"nic", b.nic}, {"numa", b.numa}}; }

Binding binding_from_json(const nlohmann::json& j) {
  try {
    return Binding{j.value("gpu", -1), j.value("nic", ""), j.value("numa", -1)};
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kInvalidArgument, "binding JSON: {}", e.what());
  }
}

}  // namespace weft::topo
