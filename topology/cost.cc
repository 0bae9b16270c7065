#include "topology/cost.h"

#include <algorithm>
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

}  // namespace

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
