// weft-sim: predicts the time and bus bandwidth of Weft's all-reduce, reduce-scatter and
// all-gather algorithms on clusters of a given node type and fabric, 8 to 16,384 GPUs, at two
// levels: the planner's closed form (the function the communicator chooses with) and an
// event-driven simulation that plays every rank's schedule over the modelled links
// (collectives/event_sim.h). Prints published figures beside its own (docs/PERFORMANCE.md,
// "weft-sim").
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "collectives/algorithms/slicing.h"
#include "collectives/event_sim.h"
#include "collectives/planner.h"
#include "collectives/tool/tool_util.h"
#include "runtime/base/error.h"
#include "topology/forest.h"
#include "topology/topology.h"
#include "topology/whatif.h"

namespace {

using namespace weft;
using topo::PathClass;
using weft::tool::parse_size;
using weft::tool::size_label;

// What --fabric describes: NICs per node and their rate, leaves, rail optimisation,
// oversubscription, the network's latency, an NVSwitch for the node's GPUs, direct node links.
struct FabricSpec {
  int nics = 0;              // 0: the file's NICs
  double rate_gbs = 0;       // 0: the file's (or the cost model's) speed
  double nvswitch_gbs = 0;   // 0: the file's GPU links
  double alpha_us = -1;      // < 0: the cost model's
  topo::NetFabric fabric;
  bool queues_set = false;
  std::string text;
};

bool as_bool(const std::string& key, const std::string& v) {
  if (v == "1" || v == "true" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "no") return false;
  fail(ErrorCode::kInvalidArgument, "fabric: {}={} (want true or false)", key, v);
}

double as_number(const std::string& key, const std::string& v, double lo) {
  double x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || !(x >= lo) || !std::isfinite(x))
    fail(ErrorCode::kInvalidArgument, "fabric: {}={} (want a number >= {})", key, v, lo);
  return x;
}

void set_fabric_key(FabricSpec& f, const std::string& key, const std::string& v) {
  if (key == "nics") f.nics = static_cast<int>(as_number(key, v, 1));
  else if (key == "rate") f.rate_gbs = topo::parse_rate_gbs(v);
  else if (key == "rail") f.fabric.rail_optimized = as_bool(key, v);
  else if (key == "oversub") f.fabric.oversubscription = as_number(key, v, 1);
  else if (key == "leaf") f.fabric.leaf_nodes = static_cast<int>(as_number(key, v, 1));
  else if (key == "alpha") f.alpha_us = as_number(key, v, 0);
  else if (key == "nvswitch") f.nvswitch_gbs = as_number(key, v, 1e-9);
  else if (key == "links") f.fabric.links = topo::parse_node_links(v);
  else if (key == "queues") {
    if (v != "fifo" && v != "fair") fail(ErrorCode::kInvalidArgument, "fabric: queues={} (want fifo or fair)", v);
    f.fabric.fifo_queues = v == "fifo";
    f.queues_set = true;
  } else
    fail(ErrorCode::kInvalidArgument,
         "fabric: unknown key '{}' (nics, rate, rail, oversub, leaf, alpha, nvswitch, links, queues)", key);
  if (f.nics > 1024) fail(ErrorCode::kInvalidArgument, "fabric: nics={} is too many", f.nics);
}

// "nics=8,rate=400gbit,rail=1,oversub=2,leaf=32" or a JSON file {"nics": 8, "rate": "400gbit", ...}.
FabricSpec parse_fabric(const std::string& text) {
  FabricSpec f;
  f.text = text;
  if (text.empty()) return f;
  if (text.find('=') == std::string::npos) {
    std::ifstream in(text);
    if (!in) fail(ErrorCode::kInvalidArgument, "fabric '{}': neither key=value pairs nor a readable JSON file", text);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object()) fail(ErrorCode::kInvalidArgument, "fabric file '{}' is not a JSON object", text);
    for (const auto& [k, v] : j.items()) set_fabric_key(f, k, v.is_string() ? v.get<std::string>() : v.dump());
    return f;
  }
  for (const std::string& item : weft::tool::split_list(text, "fabric")) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) fail(ErrorCode::kInvalidArgument, "fabric: '{}' is not key=value", item);
    set_fabric_key(f, item.substr(0, eq), item.substr(eq + 1));
  }
  return f;
}

// One node type with its fabric and cost model.
struct Setup {
  topo::NodeSummary node;
  topo::CostModel model;
  int per_node = 1;  // GPUs (ranks) per node
  std::string what;
};

Setup make_setup(topo::NodeSummary node, const FabricSpec& f, topo::CostModel model, int per_node) {
  if (f.nvswitch_gbs > 0) topo::set_gpu_switch(node, f.nvswitch_gbs);
  if (f.nics > 0) topo::set_nics(node, f.nics, f.rate_gbs > 0 ? f.rate_gbs : model.net.gbs);
  else if (f.rate_gbs > 0) topo::set_nic_speed(node, f.rate_gbs);
  if (f.alpha_us >= 0) model.net.alpha_us = f.alpha_us;
  if (f.fabric.active()) model.fabric = f.fabric;  // else the cost model's own (--cost-model)
  if (f.queues_set) model.fabric.fifo_queues = f.fabric.fifo_queues;
  // A GPU's own NIC sits on a PCIe switch built for it (GPUDirect at the NIC's rate): the cost
  // model's generic switch figures (20 and 18 GB/s) would cap a 400 Gbit/s NIC at PCIe 3 speed.
  // A path whose PCIe links the file gives stays capped by them.
  double nic_rate = 0;
  for (const auto& n : node.nics) nic_rate = std::max(nic_rate, n.gbs);
  for (PathClass c : {PathClass::kPIX, PathClass::kPXB}) {
    auto& lc = model.classes[static_cast<int>(c)];
    if (!model.fixed_gbs[static_cast<int>(c)]) lc.gbs = std::max(lc.gbs, nic_rate);
  }
  Setup s{std::move(node), std::move(model), per_node, ""};
  if (s.per_node <= 0) s.per_node = std::max(1, s.node.num_gpus());
  double nic = 0;
  for (const auto& n : s.node.nics) nic = std::max(nic, n.gbs);
  s.what = fmt::format("{} GPUs per node ({} ranks used), {} NIC{} of {:.3g} GB/s, {}{}", s.node.num_gpus(), s.per_node,
                       s.node.num_nics(), s.node.num_nics() == 1 ? "" : "s", nic > 0 ? nic : s.model.net.gbs,
                       s.model.fabric.mesh()      ? fmt::format("a mesh of {} node links", s.model.fabric.links.size())
                       : s.model.fabric.leaves() ? fmt::format("leaves of {} nodes{}, oversubscription {:g}:1",
                                                               s.model.fabric.leaf_nodes,
                                                               s.model.fabric.rail_optimized ? " (rail-optimised)" : "",
                                                               s.model.fabric.oversubscription)
                                           : std::string("one non-blocking switch"),
                       fmt::format(", network alpha {:g} us{}", s.model.net.alpha_us,
                                   s.model.fabric.fifo_queues ? ", FIFO queues (links shared by queued messages)" : ""));
  return s;
}

struct Options {
  uint64_t slice = kDefaultSliceBytes;
  bool closed = true, event = true;
  EventSimOptions sim;
  std::vector<std::string> algos;  // empty: every modelled one
};

struct Row {
  CollectiveKind coll = CollectiveKind::kAllReduce;
  int gpus = 0, nodes = 0;
  uint64_t size = 0;
  std::string algo;
  std::optional<double> closed_us, event_us;
  std::string event_note;
  bool chosen = false;
  double time_us() const { return event_us ? *event_us : closed_us ? *closed_us : 0; }
  double busbw() const {
    const double t = time_us();
    if (t <= 0 || gpus <= 1) return 0;
    const double factor = coll == CollectiveKind::kAllReduce ? 2.0 * (gpus - 1) / gpus : 1.0 * (gpus - 1) / gpus;
    return static_cast<double>(size) / (t * 1e3) * factor;
  }
};

// Every algorithm's rows for one (collective, GPU count, size).
std::vector<Row> evaluate(const Setup& s, CollectiveKind coll, int gpus, uint64_t bytes, const Options& o) {
  const int per = std::min(gpus, s.per_node);
  if (gpus > s.per_node && gpus % s.per_node != 0)
    fail(ErrorCode::kInvalidArgument, "{} GPUs is not a whole number of {}-GPU nodes", gpus, s.per_node);
  const int nodes = std::max(1, gpus / s.per_node);
  // float32 elements; reduce-scatter and all-gather sizes are the whole buffer (as weft-perf and
  // nccl-tests count them), a whole number of elements per rank.
  const uint64_t per_rank = coll == CollectiveKind::kAllReduce ? 1 : static_cast<uint64_t>(gpus);
  const uint64_t count = std::max<uint64_t>(1, bytes / 4 / per_rank);
  const uint64_t size = count * 4 * per_rank;
  const topo::ClusterView view = topo::make_uniform_cluster(s.node, nodes, per);
  std::vector<Row> rows;
  // What the runtime would run: on one node a native row where one takes the call (direct), else
  // the schedule the communicator picks.
  const std::string chosen = runtime_choice(s.node, nodes, per, coll, size, s.model, o.slice, tool::env_direct_limits(s.model))->id;
  std::map<std::string, double> closed;
  for (const auto& c : rank_plans(view, coll, size, s.model, o.slice)) closed[c.plan.algorithm] = c.predicted_us;
  const topo::NetGraph graph(view, s.model);
  AlgoOptions opt;
  opt.slice_bytes = o.slice;
  opt.node_of_rank = view.node_of_rank;
  if (nodes > 1) opt.ring = planned_ring(s.node, nodes, per);
  std::vector<std::string> ids;
  for (const Algorithm* a : algorithms_for(coll))
    if (a->predict && (!a->native() || closed.count(a->id)) && (o.algos.empty() || std::find(o.algos.begin(), o.algos.end(), a->id) != o.algos.end()))
      ids.push_back(a->id);
  for (const std::string& id : ids) {
    Row r{coll, gpus, nodes, size, id};
    if (o.closed && closed.count(id)) r.closed_us = closed[id];
    r.chosen = id == chosen;
    if (o.event && find_algorithm(id, coll)->native()) {
      r.event_note = "a native row (the shared-memory direct path): no schedule for the event level to play";
    } else if (o.event && id == "forest" && gpus > topo::kForestExactRanks) {
      // Above kForestExactRanks nothing is packed (the closed form is the cut bound itself) and
      // the schedule would be the fallback chains, millions of messages that no prediction describes.
      r.event_note = fmt::format("no packing above {} ranks (the closed form is the cut bound)", topo::kForestExactRanks);
    } else if (o.event) {
      // The packed trees the planner would pass (planned_forest).
      if (id == "forest") opt.forest = topo::packed_trees(graph).trees;
      const CollectiveArgs args{coll, count, DataType::kFloat32, RedOp::kSum, 0, false};
      const EventSimResult e = simulate_schedules(*find_algorithm(id, coll), args, opt, graph, o.sim);
      if (e.ran) r.event_us = e.time_us;
      else r.event_note = e.why_not;
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

nlohmann::json row_json(const Row& r) {
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  nlohmann::json j{{"collective", collective_name(r.coll)}, {"gpus", r.gpus}, {"nodes", r.nodes}, {"size", r.size},
                   {"algorithm", r.algo}, {"time_us", r.time_us()}, {"busbw_gbps", r.busbw()},
                   {"level", r.event_us ? "event" : "closed"}, {"closed_us", opt(r.closed_us)}, {"event_us", opt(r.event_us)},
                   {"auto", r.chosen}};
  if (!r.event_note.empty()) j["event_skipped"] = r.event_note;
  return j;
}

// ---- Published anchors -------------------------------------------------------------------------

struct Anchor {
  std::string what, published;
  double published_value = 0;
  std::string unit;
  std::optional<double> closed, event;
};

std::vector<Anchor> anchors(const topo::CostModel& base, const Options& o) {
  std::vector<Anchor> out;
  auto busbw = [](double bytes, int p, double us) { return bytes / (us * 1e3) * 2.0 * (p - 1) / p; };
  auto both = [&](const Setup& s, int gpus, uint64_t bytes, const char* algo, Anchor& a, bool as_busbw) {
    Options one = o;
    one.algos = {algo};
    const Row r = evaluate(s, CollectiveKind::kAllReduce, gpus, bytes, one).at(0);
    auto conv = [&](const std::optional<double>& us) -> std::optional<double> {
      if (!us) return std::nullopt;
      return as_busbw ? busbw(static_cast<double>(r.size), gpus, *us) : *us;
    };
    a.closed = conv(r.closed_us);
    a.event = conv(r.event_us);
  };
  // A node of `gpus` H100-like GPUs on NVSwitch (450 GB/s each) with a 400 Gbit/s NIC per GPU.
  auto h100 = [&](int gpus) {
    FabricSpec f;
    f.nics = gpus;
    f.rate_gbs = 50;
    return make_setup(topo::switched_node(gpus, 450), f, base, gpus);
  };
  {
    Anchor a{"ring all-reduce busbw, 8 H100 on NVSwitch (18 NVLink4 links, 450 GB/s per GPU), 1 GiB",
             "NCCL ~370 GB/s (nccl-tests all_reduce_perf, DGX H100)", 370, "GB/s"};
    both(h100(8), 8, 1u << 30, "ring", a, true);
    out.push_back(a);
  }
  {
    Anchor a{"ring all-reduce busbw, 16 nodes x 1 GPU, one 400 Gbit/s NIC per GPU, 1 GiB",
             "~48 GB/s per 400 Gbit/s NIC (NDR line rate after encoding)", 48, "GB/s"};
    both(h100(1), 16, 1u << 30, "ring", a, true);
    out.push_back(a);
  }
  // Latency: 8 B from 64 to 1024 ranks (one per node). A ring takes 2(p-1) steps in sequence, a
  // binary tree about 2 log2(p): the time grows 16.2x for the ring and about 1.67x for the tree.
  for (const char* algo : {"ring", "tree"}) {
    const Setup s = h100(1);
    const bool ring = std::string(algo) == "ring";
    Anchor small{"", "", 0, ""}, large{"", "", 0, ""};
    both(s, 64, 8, algo, small, false);
    both(s, 1024, 8, algo, large, false);
    Anchor a{fmt::format("{} all-reduce of 8 B: time at 1024 ranks / time at 64 ranks (1 per node)", algo),
             ring ? "linear in ranks: 2046 / 126 steps = 16.2x" : "logarithmic: log2 1024 / log2 64 = 1.67x",
             ring ? 2046.0 / 126 : 10.0 / 6, "x"};
    if (small.closed && large.closed) a.closed = *large.closed / *small.closed;
    if (small.event && large.event) a.event = *large.event / *small.event;
    out.push_back(a);
  }
  return out;
}

// ---- SVG ---------------------------------------------------------------------------------------

std::string svg_plot(const std::vector<Row>& rows, const std::string& title) {
  // One panel per (collective, size): busbw against log2(GPUs), one line per algorithm.
  std::map<std::pair<int, uint64_t>, std::map<std::string, std::vector<const Row*>>> panels;
  for (const Row& r : rows) panels[{static_cast<int>(r.coll), r.size}][r.algo].push_back(&r);
  const int W = 720, H = 320, L = 70, R = 150, T = 40, B = 50;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n",
      W, H * std::max<size_t>(1, panels.size()));
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"};
  auto esc = [](std::string s) {
    std::string o;
    for (char c : s) o += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
    return o;
  };
  int panel = 0;
  for (const auto& [key, lines] : panels) {
    const int y0 = panel++ * H;
    double xmin = 1e300, xmax = -1e300, ymax = 0;
    for (const auto& [algo, pts] : lines)
      for (const Row* r : pts) {
        xmin = std::min(xmin, std::log2(static_cast<double>(r->gpus)));
        xmax = std::max(xmax, std::log2(static_cast<double>(r->gpus)));
        ymax = std::max(ymax, r->busbw());
      }
    if (xmax <= xmin) xmax = xmin + 1;
    if (ymax <= 0) ymax = 1;
    ymax *= 1.1;
    auto X = [&](double g) { return L + (std::log2(g) - xmin) / (xmax - xmin) * (W - L - R); };
    auto Y = [&](double v) { return y0 + T + (1 - v / ymax) * (H - T - B); };
    out += fmt::format("<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{}: {} {}</text>\n", L, y0 + 20, esc(title),
                       collective_name(static_cast<CollectiveKind>(key.first)), size_label(static_cast<double>(key.second)));
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", L, Y(0), W - R, Y(0));
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", L, Y(0), L, Y(ymax));
    for (int k = 0; k <= 4; ++k) {
      const double v = ymax * k / 4;
      out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3g}</text>\n", L - 5, Y(v) + 4, v);
    }
    std::set<int> xs;
    for (const auto& [algo, pts] : lines)
      for (const Row* r : pts) xs.insert(r->gpus);
    for (int g : xs)
      out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", X(g), Y(0) + 16, g);
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">GPUs</text>\n", (L + W - R) / 2, y0 + H - 10);
    out += fmt::format("<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">busbw GB/s</text>\n",
                       y0 + H / 2, y0 + H / 2);
    int c = 0;
    for (const auto& [algo, pts] : lines) {
      const char* color = colors[c % 7];
      std::string poly;
      for (const Row* r : pts) poly += fmt::format("{:.1f},{:.1f} ", X(r->gpus), Y(r->busbw()));
      out += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", color, poly);
      for (const Row* r : pts)
        out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"/>\n", X(r->gpus), Y(r->busbw()),
                           r->chosen ? 5 : 2.5, color);
      out += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>\n", W - R + 10, y0 + T + 16 * c + 10, color, algo);
      ++c;
    }
    out += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"gray\">big dot: automatic choice</text>\n", W - R + 10,
                       y0 + T + 16 * c + 10);
  }
  return out + "</svg>\n";
}

std::string us_text(const std::optional<double>& v) { return v ? fmt::format("{:.1f}", *v) : std::string("-"); }

// The text report: a table per collective and size, what the event level skipped, the anchors.
void print_text(const std::vector<Row>& rows, const std::string& input, const Setup& setup, const Options& o,
                const std::vector<Anchor>& anchor_rows) {
  std::cout << fmt::format("{}: {}\n", input.empty() ? "this machine" : input, setup.what);
  std::cout << "closed: the planner's formulas; event: every rank's schedule played over the modelled links "
               "(* = the automatic choice; busbw from the event level where it ran)\n";
  CollectiveKind last_c = CollectiveKind::kBarrier;
  uint64_t last_s = 0;
  for (const Row& r : rows) {
    if (r.coll != last_c || r.size != last_s) {
      std::cout << fmt::format("\n{} {}\n{:>7} {:>6} {:>8} {:>14} {:>14} {:>7} {:>11}\n", collective_name(r.coll),
                               size_label(static_cast<double>(r.size)), "gpus", "nodes", "algo", "closed us", "event us",
                               "ev/cl", "busbw GB/s");
      last_c = r.coll, last_s = r.size;
    }
    const std::string ratio = r.closed_us && r.event_us ? fmt::format("{:.2f}", *r.event_us / *r.closed_us) : "-";
    std::cout << fmt::format("{:>7} {:>6} {:>7}{} {:>14} {:>14} {:>7} {:>11.1f}\n", r.gpus, r.nodes, r.algo,
                             r.chosen ? "*" : " ", us_text(r.closed_us), us_text(r.event_us), ratio, r.busbw());
  }
  // Why the event level left rows out: native rows (no schedule), steps past --max-steps, no packing.
  std::set<std::string> skipped, unpacked, native;
  for (const Row& r : rows)
    if (!r.event_note.empty() && o.event)
      (find_algorithm(r.algo, r.coll)->native()                     ? native
       : r.algo == "forest" && r.gpus > topo::kForestExactRanks ? unpacked
                                                                : skipped)
          .insert(fmt::format("{} at {} GPUs", r.algo, r.gpus));
  if (!native.empty()) {
    std::cout << "\nnative rows (the shared-memory direct path of one node's host memory: a closed form, no schedule for "
                 "the event level):";
    for (const auto& s : native) std::cout << " " << s << ";";
    std::cout << "\n";
  }
  if (!skipped.empty()) {
    std::cout << "\nevent level skipped (more steps than --max-steps " << o.sim.max_steps << "):";
    for (const auto& s : skipped) std::cout << " " << s << ";";
    std::cout << "\n";
  }
  if (!unpacked.empty()) {
    std::cout << "event level skipped (no packing above " << topo::kForestExactRanks
              << " ranks: the closed form is the cut bound):";
    for (const auto& s : unpacked) std::cout << " " << s << ";";
    std::cout << "\n";
  }
  if (!anchor_rows.empty()) {
    std::cout << "\nPublished anchors beside this model (built-in setups, the cost model's alpha):\n";
    for (const Anchor& a : anchor_rows)
      std::cout << fmt::format("  {}\n    published: {}   model: closed {} {}, event {} {}\n", a.what, a.published,
                               us_text(a.closed), a.unit, us_text(a.event), a.unit);
  }
}

nlohmann::json report_json(const std::vector<Row>& rows, const std::string& input, const Setup& setup,
                           const FabricSpec& fabric, const Options& o, const std::vector<Anchor>& anchor_rows,
                           double seconds) {
  nlohmann::json j;
  j["setup"] = {{"input", input}, {"node", setup.what}, {"fabric", fabric.text}, {"slice", o.slice},
                {"cost_model", setup.model.to_json()}, {"seconds", seconds}};
  j["results"] = nlohmann::json::array();
  for (const Row& r : rows) j["results"].push_back(row_json(r));
  j["anchors"] = nlohmann::json::array();
  for (const Anchor& a : anchor_rows)
    j["anchors"].push_back({{"what", a.what}, {"published", a.published}, {"published_value", a.published_value},
                            {"unit", a.unit}, {"closed", a.closed ? nlohmann::json(*a.closed) : nlohmann::json(nullptr)},
                            {"event", a.event ? nlohmann::json(*a.event) : nlohmann::json(nullptr)}});
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"weft-sim: predicted time and bus bandwidth of Weft's collectives on clusters of a node type"};
  std::string input, gpus_text = "8,64,1024,16384", sizes_text = "256M", colls_text = "allreduce", fabric_text, links,
                                  cost_file, slice, level = "both", svg, algos;
  int per_node = 0;
  bool json = false, csv = false, no_anchors = false;
  Options o;
  app.add_option("--input,-i", input, "hwloc XML or NCCL topology XML of one node (default: WEFT_TOPO_FILE or this machine)");
  app.add_option("--gpus,-g", gpus_text, "GPU (rank) counts, comma-separated");
  app.add_option("--size,-s", sizes_text, "message sizes, comma-separated; suffixes K, M, G");
  app.add_option("--collective,-c", colls_text, "allreduce, reducescatter, allgather (comma-separated)");
  app.add_option("--algo", algos, "algorithms to model (default: every one with a prediction)");
  app.add_option("--gpus-per-node", per_node, "ranks per node (default: the node's GPUs, or 1)")->check(CLI::Range(0, 4096));
  app.add_option("--fabric", fabric_text,
                 "nics=N,rate=400gbit,rail=0|1,oversub=X,leaf=NODES,alpha=US,nvswitch=GBS,queues=fair|fifo (or a JSON file of "
                 "those keys)");
  app.add_option("--links", links, "a mesh instead of switches: direct node links, \"0-1:1gbit,1-2:250mbit\"");
  app.add_option("--cost-model", cost_file, "cost model JSON (default: WEFT_COST_MODEL, else the built-in figures)");
  app.add_option("--slice", slice, "the schedules' slice size (default: WEFT_SLICE_BYTES, else 512K)");
  app.add_option("--level", level, "closed (the planner's formulas), event (playing the schedules) or both");
  app.add_option("--max-steps", o.sim.max_steps, "the most schedule steps the event level plays per case")
      ->check(CLI::Range(uint64_t{1}, uint64_t{4000000000}));
  app.add_option("--compute-gbs", o.sim.compute_gbs, "reduction speed per rank for the event level, GB/s (0: free)");
  app.add_flag("--json", json, "JSON: {setup, results: [one object per (collective, gpus, size, algorithm)], anchors}");
  app.add_flag("--csv", csv, "CSV, one line per (collective, gpus, size, algorithm)");
  app.add_option("--svg", svg, "write busbw against GPU count to this SVG file");
  app.add_flag("--no-anchors", no_anchors, "leave out the published anchors");
  CLI11_PARSE(app, argc, argv);

  try {
    if (level != "closed" && level != "event" && level != "both")
      fail(ErrorCode::kInvalidArgument, "--level {} (closed, event or both)", level);
    o.closed = level != "event";
    o.event = level != "closed";
    if (slice.empty())
      if (const char* env = std::getenv("WEFT_SLICE_BYTES"); env && *env) slice = env;
    o.slice = slice.empty() ? kDefaultSliceBytes : parse_size(slice);
    if (o.slice < 4096 || o.slice > (uint64_t{1} << 30))
      fail(ErrorCode::kInvalidArgument, "slice size {} is outside 4096..1G (--slice, WEFT_SLICE_BYTES)", o.slice);
    std::vector<int> gpus;
    for (const std::string& g : weft::tool::split_list(gpus_text, "--gpus")) {
      int v = 0;
      auto [p, ec] = std::from_chars(g.data(), g.data() + g.size(), v);
      if (ec != std::errc() || p != g.data() + g.size() || v < 1 || v > (1 << 20))
        fail(ErrorCode::kInvalidArgument, "--gpus: '{}' is not a GPU count in 1..1048576", g);
      gpus.push_back(v);
    }
    std::vector<uint64_t> sizes;
    for (const std::string& s : weft::tool::split_list(sizes_text, "--size")) {
      sizes.push_back(parse_size(s));
      if (sizes.back() == 0) fail(ErrorCode::kInvalidArgument, "--size: '{}' is empty", s);
    }
    std::vector<CollectiveKind> colls;
    for (const std::string& c : weft::tool::split_list(colls_text, "--collective")) {
      auto k = parse_collective(c);
      if (!k || (*k != CollectiveKind::kAllReduce && *k != CollectiveKind::kReduceScatter && *k != CollectiveKind::kAllGather))
        fail(ErrorCode::kInvalidArgument, "--collective: '{}' (allreduce, reducescatter or allgather)", c);
      colls.push_back(*k);
    }
    if (!algos.empty())
      for (const std::string& a : weft::tool::split_list(algos, "--algo")) {
        bool known = false;
        for (const Algorithm& row : algorithm_table()) known = known || (a == row.id && row.predict);
        if (!known) fail(ErrorCode::kInvalidArgument, "--algo: '{}' has no prediction (ring, tree, rhd, hier, ...)", a);
        o.algos.push_back(a);
      }
    FabricSpec fabric = parse_fabric(fabric_text);
    if (!links.empty()) fabric.fabric.links = topo::parse_node_links(links);
    if (fabric.fabric.mesh() && fabric.fabric.leaves())
      fail(ErrorCode::kInvalidArgument, "fabric: a mesh (links) has no leaves (leaf)");
    const topo::CostModel model = cost_file.empty() ? topo::CostModel::from_env() : topo::CostModel::load(cost_file);
    const topo::NodeSummary node =
        topo::summarize(input.empty() ? topo::load_topology() : topo::load_topology_file(input));
    const Setup setup = make_setup(node, fabric, model, per_node);

    std::vector<Row> rows;
    const auto start = std::chrono::steady_clock::now();
    for (CollectiveKind c : colls)
      for (uint64_t size : sizes)
        for (int g : gpus) {
          auto r = evaluate(setup, c, g, size, o);
          rows.insert(rows.end(), r.begin(), r.end());
        }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::vector<Anchor> anchor_rows = no_anchors ? std::vector<Anchor>{} : anchors(model, o);
    if (!svg.empty()) {
      std::ofstream f(svg);
      f << svg_plot(rows, input.empty() ? std::string("this node") : input);
      if (!f) fail(ErrorCode::kSystemError, "cannot write '{}'", svg);
    }
    if (json) {
      std::cout << report_json(rows, input, setup, fabric, o, anchor_rows, seconds).dump(2) << "\n";
      return 0;
    }
    if (csv) {
      std::cout << "collective,gpus,nodes,size,algorithm,closed_us,event_us,time_us,busbw_gbps,auto\n";
      for (const Row& r : rows)
        std::cout << fmt::format("{},{},{},{},{},{},{},{:.3f},{:.3f},{}\n", collective_name(r.coll), r.gpus, r.nodes, r.size,
                                 r.algo, r.closed_us ? fmt::format("{:.3f}", *r.closed_us) : "",
                                 r.event_us ? fmt::format("{:.3f}", *r.event_us) : "", r.time_us(), r.busbw(),
                                 r.chosen ? 1 : 0);
      return 0;
    }
    print_text(rows, input, setup, o, anchor_rows);
    std::cout << fmt::format("\n({:.2f} s)\n", seconds);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-sim: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
