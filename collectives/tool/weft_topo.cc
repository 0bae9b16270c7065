// weft-topo: prints the node topology (nvidia-smi topo -m style, or --json) and, with `plan`, the
// rings, rails, trees and predicted times Weft would use for a cluster of such nodes.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "collectives/planner.h"
#include "collectives/tool/tool_util.h"
#include "runtime/base/error.h"
#include "topology/topology.h"

namespace {

using weft::tool::parse_size;

weft::topo::NodeTopology load(const std::string& input) {
  return input.empty() ? weft::topo::load_topology() : weft::topo::load_topology_file(input);
}

// The predicted rows, fastest first, then the collective's rows without a prediction (said
// plainly), each native row marked; then the best prediction's explanation.
void print_candidates(const std::vector<weft::topo::PlanCandidate>& plans,
                      const std::vector<const weft::Algorithm*>& unpredicted, weft::CollectiveKind coll, double ideal) {
  const std::string collective(weft::collective_name(coll));
  for (const auto& c : plans) {
    const weft::Algorithm* row = weft::find_algorithm(c.plan.algorithm, coll);
    std::cout << fmt::format("  {:<8} {:<20} {:>12.2f} us   {}{}\n", c.plan.algorithm, c.plan.name, c.predicted_us,
                             ideal > 0 ? fmt::format("{:.2f}x the ideal {:.2f} us", c.predicted_us / ideal, ideal)
                                       : std::string(),
                             !row ? fmt::format("  (the model's only: {} has no such row)", collective)
                             : row->native() ? std::string("  (native row)") : std::string());
  }
  for (const weft::Algorithm* a : unpredicted)
    std::cout << fmt::format("  {:<8} {:<20} no prediction{}\n", a->id, a->name ? a->name : a->id,
                             a->native() ? "  (native row)" : "");
  if (!plans.empty()) std::cout << "\nBest predicted: " << plans.front().plan.explain();
  else std::cout << "\nThe cost model predicts no algorithm of " << collective << ".\n";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"weft-topo: node topology, path classes and communication plans"};
  std::string input;
  bool json = false;
  app.add_option("--input,-i", input, "hwloc XML (v1/v2) or NCCL topology XML file (default: WEFT_TOPO_FILE or this machine)");
  app.add_flag("--json", json, "machine-readable output (schema in docs/TOPOLOGY.md)");

  CLI::App* plan = app.add_subcommand("plan", "rings, rails, trees and predicted times for nodes x ranks of this node type");
  int nodes = 1, rpn = 0;
  std::string size = "64M", collective = "allreduce", cost_file, slice;
  plan->add_option("--nodes,-n", nodes, "number of nodes")->check(CLI::Range(1, 65536));
  plan->add_option("--ranks-per-node,-r", rpn, "ranks per node (default: one per GPU, else one per core, at least 2)")->check(CLI::Range(0, 4096));
  plan->add_option("--size,-s", size, "message size in bytes; suffixes K, M, G");
  plan->add_option("--collective,-c", collective, "allreduce | reducescatter | allgather | broadcast | reduce | alltoall | alltoallv | barrier");
  plan->add_option("--cost-model", cost_file, "cost model JSON overrides (default: WEFT_COST_MODEL)");
  plan->add_option("--input,-i", input, "hwloc or NCCL topology XML file");
  plan->add_flag("--json", json, "machine-readable output");
  int host_ranks = -1, host_cores = -1;
  plan->add_option("--host-ranks", host_ranks,
                   "ranks that share one machine's cores (default: the cost model's, else none); with more ranks than "
                   "--host-cores every step waits host.msg_cpu_us x (ranks / cores - 1) for a core")
      ->check(CLI::Range(0, 1 << 20));
  plan->add_option("--host-cores", host_cores, "cores those ranks share")->check(CLI::Range(0, 1 << 20));
  plan->add_option("--slice", slice,
                   "the schedules' slice size, as the ranks would use it (default: WEFT_SLICE_BYTES, else 512K)");
  CLI11_PARSE(app, argc, argv);

  try {
    weft::topo::NodeSummary s = weft::topo::summarize(load(input));
    if (!*plan) {
      if (json) std::cout << weft::topo::report_json(s).dump(2) << "\n";
      else std::cout << weft::topo::format_matrix(s);
      return 0;
    }
    auto coll = weft::parse_any_collective(collective);
    if (!coll)
      weft::fail(weft::ErrorCode::kInvalidArgument,
                 "unknown collective '{}' (allreduce, reducescatter, allgather, broadcast, reduce, alltoall, barrier, alltoallv)",
                 collective);
    const size_t bytes = parse_size(size);
    if (slice.empty())
      if (const char* env = std::getenv("WEFT_SLICE_BYTES"); env && *env) slice = env;
    const uint64_t slice_bytes = slice.empty() ? weft::kDefaultSliceBytes : parse_size(slice);
    if (slice_bytes < 4096 || slice_bytes > (uint64_t{1} << 30))
      weft::fail(weft::ErrorCode::kInvalidArgument, "slice size {} is outside 4096..1G (--slice, WEFT_SLICE_BYTES)",
                 slice_bytes);
    // Default: what a job here would run (one rank per GPU, else per core); never a 1 x 1 job,
    // which moves nothing and would plan zeros.
    if (rpn == 0) rpn = s.num_gpus() > 0 ? s.num_gpus() : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
    auto model = cost_file.empty() ? weft::topo::CostModel::from_env() : weft::topo::CostModel::load(cost_file);
    if (host_ranks >= 0) model.host.ranks = host_ranks;
    if (host_cores >= 0) model.host.cores = host_cores;
    auto view = weft::topo::make_uniform_cluster(s, nodes, rpn);
    auto plans = weft::rank_plans(view, *coll, bytes, model, slice_bytes);
    // What a job of this shape runs (WEFT_ALGO unset): a native row where one takes the call.
    const weft::Algorithm* runs =
        weft::runtime_choice(s, nodes, rpn, *coll, bytes, model, slice_bytes, weft::tool::env_direct_limits(model));
    // The collective's rows without a prediction, said plainly.
    std::vector<const weft::Algorithm*> unpredicted;
    for (const weft::Algorithm* a : weft::algorithms_for(*coll)) {
      bool predicted = false;
      for (const auto& c : plans) predicted = predicted || c.plan.algorithm == a->id;
      if (!predicted) unpredicted.push_back(a);
    }
    if (json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& c : plans) {
        nlohmann::json trees = nlohmann::json::array();
        for (const auto& t : c.plan.trees) trees.push_back({{"root", t.root}, {"parent", t.parent}});
        nlohmann::json rails = nlohmann::json::array();
        for (const auto& r : c.plan.rails) rails.push_back({{"index", r.index}, {"ranks", r.ranks}, {"nics", r.nics}});
        j.push_back({{"algorithm", c.plan.name},
                     {"id", c.plan.algorithm},  // the table's id: what WEFT_ALGO takes
                     {"native", weft::find_algorithm(c.plan.algorithm, *coll) && weft::find_algorithm(c.plan.algorithm, *coll)->native()},
                     {"predicted_us", c.predicted_us},
                     {"ideal_us", c.plan.ideal_us},
                     {"bottleneck_gbs", c.plan.bottleneck_gbs},
                     {"rings", c.plan.rings},
                     {"rails", rails},
                     {"trees", trees},
                     {"reasons", c.plan.reasons}});
      }
      nlohmann::json none = nlohmann::json::array();
      for (const weft::Algorithm* a : unpredicted)
        none.push_back({{"id", a->id}, {"algorithm", a->name ? a->name : a->id}, {"native", a->native()}});
      std::cout << nlohmann::json{{"nodes", nodes}, {"ranks_per_node", rpn}, {"bytes", bytes},
                                  {"collective", collective}, {"candidates", j}, {"no_prediction", none},
                                  {"ideal_us", plans.empty() ? 0.0 : plans.front().plan.ideal_us},
                                  {"weft_algorithm", runs ? runs->id : ""}}.dump(2) << "\n";
      return 0;
    }
    std::cout << fmt::format("{} nodes x {} ranks ({} GPUs per node{}), {} of {} bytes\n\n", nodes, rpn, s.num_gpus(),
                             s.num_gpus() == 0 ? ", CPU-only: no GPU found" : "", collective, bytes);
    const double ideal = plans.empty() ? 0 : plans.front().plan.ideal_us;
    std::cout << (*coll == weft::CollectiveKind::kAllReduce
                      ? "Predicted times (WEFT_ALGO id, name; fastest first; ideal: a reduce-scatter and an all-gather each at the worst cut's bound,\n"
                        "ForestColl's; schedules that overlap the two on full-duplex links can come in under it):\n"
                      : "Predicted times (WEFT_ALGO id, name; fastest first; ideal: the worst cut's bound on the transfer, which no schedule beats):\n");
    print_candidates(plans, unpredicted, *coll, ideal);
    std::cout << "Weft algorithm (WEFT_ALGO unset): " << (runs ? runs->id : "none")
              << (runs && runs->native() ? " (a native row: it takes this call before any schedule)" : "") << "\n";
    for (size_t i = 1; i < plans.size(); ++i) {
      std::cout << "\nAlternative: " << fmt::format("{} ({}) {:.2f} us\n", plans[i].plan.algorithm, plans[i].plan.name,
                                                     plans[i].predicted_us);
      for (const auto& r : plans[i].plan.reasons) std::cout << "  - " << r << "\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-topo: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
