#include "topology/cost.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "runtime/base/error.h"

namespace weft::topo {

CostModel CostModel::defaults() {
  CostModel m;
  m.classes[static_cast<int>(PathClass::kSelf)] = {0.5, 20.0};
  m.classes[static_cast<int>(PathClass::kNV)] = {1.0, 20.0};
  m.classes[static_cast<int>(PathClass::kPIX)] = {1.5, 20.0};
  m.classes[static_cast<int>(PathClass::kPXB)] = {2.0, 18.0};
  m.classes[static_cast<int>(PathClass::kPHB)] = {2.5, 16.0};
  m.classes[static_cast<int>(PathClass::kNODE)] = {3.0, 14.0};
  m.classes[static_cast<int>(PathClass::kSYS)] = {4.0, 10.0};
  m.net = {5.0, 12.5};
  return m;
}

namespace {

double positive(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = j.at(key);
  if (!v.is_number() || v.get<double>() < 0 || (std::string_view(key) == "gbs" && v.get<double>() <= 0))
    fail(ErrorCode::kInvalidArgument, "cost model: {}.{} must be a positive number", where, key);
  return v.get<double>();
}

bool number_then(std::string_view text, double& value, std::string& suffix) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + i, value);
  if (ec != std::errc() || ptr != text.data() + i || !(value > 0) || !std::isfinite(value)) return false;
  suffix.clear();
  for (char c : text.substr(i)) suffix.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return true;
}

void apply_fabric(NetFabric& f, const nlohmann::json& v) {
  if (!v.is_object()) fail(ErrorCode::kInvalidArgument, "cost model: \"fabric\" must be an object");
  for (const auto& [key, x] : v.items()) {
    if (key == "leaf_nodes") {
      if (!x.is_number_integer() || x.get<long long>() < 0 || x.get<long long>() > (1 << 20))
        fail(ErrorCode::kInvalidArgument, "cost model: fabric.leaf_nodes must be a whole number of nodes (0: no leaves)");
      f.leaf_nodes = x.get<int>();
    } else if (key == "rail_optimized") {
      if (!x.is_boolean()) fail(ErrorCode::kInvalidArgument, "cost model: fabric.rail_optimized must be true or false");
      f.rail_optimized = x.get<bool>();
    } else if (key == "oversubscription") {
      if (!x.is_number() || !(x.get<double>() >= 1))
        fail(ErrorCode::kInvalidArgument, "cost model: fabric.oversubscription must be a number >= 1");
      f.oversubscription = x.get<double>();
    } else if (key == "links") {
      if (x.is_string()) {
        f.links = parse_node_links(x.get<std::string>());
      } else if (x.is_array()) {
        f.links.clear();
        for (const auto& l : x) {
          if (!l.is_object() || !l.contains("nodes") || !l.contains("gbs") || !l["nodes"].is_array() || l["nodes"].size() != 2 ||
              !l["nodes"][0].is_number_integer() || !l["nodes"][1].is_number_integer())
            fail(ErrorCode::kInvalidArgument, "cost model: fabric.links[{}] needs \"nodes\": [a, b] and \"gbs\"", f.links.size());
          NodeLink n{l["nodes"][0].get<int>(), l["nodes"][1].get<int>(), positive(l, "gbs", "fabric.links"), -1};
          if (l.contains("alpha_us")) n.alpha_us = positive(l, "alpha_us", "fabric.links");
          if (n.a < 0 || n.b < 0 || n.a == n.b)
            fail(ErrorCode::kInvalidArgument, "cost model: fabric.links[{}] joins nodes {} and {}", f.links.size(), n.a, n.b);
          f.links.push_back(n);
        }
      } else {
        fail(ErrorCode::kInvalidArgument, "cost model: fabric.links must be a string (\"0-1:1gbit,...\") or an array");
      }
    } else if (key == "queues") {
      if (!x.is_string() || (x.get<std::string>() != "fair" && x.get<std::string>() != "fifo"))
        fail(ErrorCode::kInvalidArgument, "cost model: fabric.queues must be \"fair\" or \"fifo\"");
      f.fifo_queues = x.get<std::string>() == "fifo";
    } else {
      fail(ErrorCode::kInvalidArgument, "cost model: unknown fabric key '{}' (leaf_nodes, rail_optimized, "
           "oversubscription, links, queues)", key);
    }
  }
}

}  // namespace

double parse_rate_gbs(std::string_view text) {
  double value = 0;
  std::string unit;
  if (!number_then(text, value, unit))
    fail(ErrorCode::kInvalidArgument, "bad rate '{}' (a positive number with gbit, mbit, kbit, bit or GB/s)", text);
  double gbs = 0;
  if (unit.empty() || unit == "gb/s" || unit == "gbps") gbs = value;  // gigabytes per second
  else if (unit == "gbit" || unit == "g") gbs = value / 8;
  else if (unit == "mbit" || unit == "m") gbs = value / 8e3;
  else if (unit == "kbit" || unit == "k") gbs = value / 8e6;
  else if (unit == "bit") gbs = value / 8e9;
  else if (unit == "mb/s") gbs = value / 1e3;
  else fail(ErrorCode::kInvalidArgument, "bad rate unit in '{}' (gbit, mbit, kbit, bit, GB/s or MB/s)", text);
  if (!(gbs > 0) || gbs > 1e6) fail(ErrorCode::kInvalidArgument, "rate '{}' is out of range", text);
  return gbs;
}

std::vector<NodeLink> parse_node_links(std::string_view text) {
  std::vector<NodeLink> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) {
      if (end == text.size()) break;
      fail(ErrorCode::kInvalidArgument, "links '{}': an empty entry", text);
    }
    const size_t dash = item.find('-'), colon = item.find(':');
    int a = -1, b = -1;
    auto num = [](std::string_view t, int& v) {
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      return ec == std::errc() && p == t.data() + t.size() && v >= 0 && v < (1 << 20);
    };
    if (dash == std::string_view::npos || colon == std::string_view::npos || colon < dash ||
        !num(item.substr(0, dash), a) || !num(item.substr(dash + 1, colon - dash - 1), b))
      fail(ErrorCode::kInvalidArgument, "links: bad entry '{}' (want A-B:RATE, e.g. 0-1:1gbit)", item);
    if (a == b) fail(ErrorCode::kInvalidArgument, "links: '{}' joins node {} to itself", item, a);
    for (const NodeLink& l : out)
      if ((l.a == a && l.b == b) || (l.a == b && l.b == a))
        fail(ErrorCode::kInvalidArgument, "links: nodes {} and {} are joined twice", a, b);
    out.push_back({a, b, parse_rate_gbs(item.substr(colon + 1)), -1});
    if (end == text.size()) break;
  }
  if (out.empty()) fail(ErrorCode::kInvalidArgument, "links: none given");
  return out;
}

void CostModel::apply_json(const nlohmann::json& j) {
  if (!j.is_object()) fail(ErrorCode::kInvalidArgument, "cost model: the document must be a JSON object");
  if (j.contains("classes")) {
    if (!j["classes"].is_object()) fail(ErrorCode::kInvalidArgument, "cost model: \"classes\" must be an object");
    for (const auto& [name, v] : j["classes"].items()) {
      auto c = parse_path_class(name);
      if (!c || !v.is_object()) fail(ErrorCode::kInvalidArgument, "cost model: unknown path class '{}'", name);
      auto& lc = classes[static_cast<int>(*c)];
      if (v.contains("alpha_us")) lc.alpha_us = positive(v, "alpha_us", name);
      if (v.contains("gbs")) {
        lc.gbs = positive(v, "gbs", name);
        fixed_gbs[static_cast<int>(*c)] = true;
      }
    }
  }
  if (j.contains("net")) {
    const auto& v = j["net"];
    if (!v.is_object()) fail(ErrorCode::kInvalidArgument, "cost model: \"net\" must be an object");
    if (v.contains("alpha_us")) net.alpha_us = positive(v, "alpha_us", "net");
    if (v.contains("gbs")) {
      net.gbs = positive(v, "gbs", "net");
      fixed_net_gbs = true;
    }
  }
  if (j.contains("host")) {
    const auto& v = j["host"];
    if (!v.is_object()) fail(ErrorCode::kInvalidArgument, "cost model: \"host\" must be an object");
    if (v.contains("msg_cpu_us")) host.msg_cpu_us = positive(v, "msg_cpu_us", "host");
    if (v.contains("ranks")) host.ranks = static_cast<int>(positive(v, "ranks", "host"));
    if (v.contains("cores")) host.cores = static_cast<int>(positive(v, "cores", "host"));
  }
  if (j.contains("fabric")) apply_fabric(fabric, j["fabric"]);
}

double host_wait_us(const HostCpu& h, int nranks) {
  if (!h.oversubscribed() || nranks <= 0) return 0;
  const double per_core = static_cast<double>(std::min(h.ranks, nranks)) / h.cores;
  return per_core > 1 ? h.msg_cpu_us * (per_core - 1) : 0;
}

CostModel CostModel::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(ErrorCode::kSystemError, "cost model: cannot open '{}'", path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) fail(ErrorCode::kInvalidArgument, "cost model: '{}' is not valid JSON", path);
  CostModel m = defaults();
  m.apply_json(j);
  return m;
}

CostModel CostModel::from_env() {
  const char* p = std::getenv("WEFT_COST_MODEL");
  return p && *p ? load(p) : defaults();
}

nlohmann::json CostModel::to_json() const {
  nlohmann::json j;
  for (int i = 0; i < 7; ++i)
    j["classes"][path_class_name(static_cast<PathClass>(i))] = {{"alpha_us", classes[i].alpha_us}, {"gbs", classes[i].gbs}};
  j["net"] = {{"alpha_us", net.alpha_us}, {"gbs", net.gbs}};
  j["host"] = {{"msg_cpu_us", host.msg_cpu_us}, {"ranks", host.ranks}, {"cores", host.cores}};
  if (fabric.active() || fabric.fifo_queues) {
    nlohmann::json links = nlohmann::json::array();
    for (const NodeLink& l : fabric.links) {
      links.push_back({{"nodes", {l.a, l.b}}, {"gbs", l.gbs}});
      if (l.alpha_us >= 0) links.back()["alpha_us"] = l.alpha_us;
    }
    j["fabric"] = {{"leaf_nodes", fabric.leaf_nodes}, {"rail_optimized", fabric.rail_optimized},
                   {"oversubscription", fabric.oversubscription}, {"links", links},
                   {"queues", fabric.fifo_queues ? "fifo" : "fair"}};
  }
  return j;
}

LinkCost CostModel::edge(const Path& p) const {
  const int i = static_cast<int>(p.cls);
  LinkCost c = classes[i];
  if (fixed_gbs[i] || p.gbs <= 0) return c;
  // NVLink/XGMI: the links' own bandwidth; PCIe classes: the class figure capped by the slowest link.
  c.gbs = p.cls == PathClass::kNV ? p.gbs : std::min(c.gbs, p.gbs);
  return c;
}

LinkCost CostModel::network(double nic_gbs, int sharing) const {
  LinkCost c = net;
  if (!fixed_net_gbs && nic_gbs > 0) c.gbs = nic_gbs;
  c.gbs /= std::max(1, sharing);
  return c;
}

}  // namespace weft::topo
