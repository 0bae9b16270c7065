#include "runtime/comm/algorithm_choice.h"

#include <algorithm>
#include <string_view>

#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/deterministic.h"
#include "collectives/convert_kernels.h"
#include "collectives/planner.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "topology/topology.h"

namespace weft {

AlgorithmChoice::AlgorithmChoice(CommConfig& config, const Membership& members) : config_(config), m_(members) {}
AlgorithmChoice::~AlgorithmChoice() = default;

std::shared_ptr<const Schedule> AlgorithmChoice::schedule_for(const CollectiveArgs& a, const Algorithm* forced) {
  if (forced && forced->native()) forced = nullptr;  // a native row that did not run: the automatic schedule
  // An all-to-all with unequal splits is not cached: its counts are the key, and they change from
  // call to call (a mixture of experts' routing); its schedule is n-1 sends and receives, cheap to
  // build each time.
  const bool cached = a.kind != CollectiveKind::kAllToAllv;
  auto key = std::make_tuple(static_cast<int>(a.kind), a.count, static_cast<int>(a.dtype), static_cast<int>(a.op), a.root,
                             a.in_place, forced);
  if (cached) {
    auto it = schedules_.find(key);
    if (it != schedules_.end()) return it->second;
    if (schedules_.size() > 4096) schedules_.clear();
  }
  AlgoOptions opt;
  opt.slice_bytes = config_.slice_bytes;
  opt.channels = config_.channels;
  opt.node_of_rank = m_.node_of_rank;
  opt.ring = ring();
  opt.wire = wire();
  Schedule s;
  if (a.kind == CollectiveKind::kSend || a.kind == CollectiveKind::kRecv) {
    s = build_p2p_schedule(a, m_.rank, m_.size);
  } else {
    const Algorithm* algo = forced;
    // 16-bit sums, and float32 sums with a wire type, accumulate in float32 and round once.
    if (!algo && sums_in_f32(a)) algo = find_algorithm("f32acc", a.kind);
    const bool modelled = a.kind == CollectiveKind::kAllReduce || a.kind == CollectiveKind::kReduceScatter ||
                          a.kind == CollectiveKind::kAllGather;
    if (!algo && modelled && m_.num_nodes > 1) {
      // The model's size is the whole buffer: the gathered or scattered one for all-gather and
      // reduce-scatter (a.count is one rank's block there), as in weft-perf and weft-topo plan.
      const uint64_t per = a.kind == CollectiveKind::kAllReduce ? 1 : static_cast<uint64_t>(m_.size);
      algo = planned(a.kind, a.count * dtype_size(a.dtype) * per);
    }
    if (!algo) algo = default_algorithm(a.kind, a.count * dtype_size(a.dtype), m_.size);
    if (config_.deterministic) algo = deterministic_algorithm(algo, a.kind);
    if (!algo) fail(ErrorCode::kInvalidUsage, "{} is not implemented yet", collective_name(a.kind));
    if (std::string_view(algo->id) == "forest") opt.forest = forest();
    s = build_schedule(*algo, a, m_.rank, m_.size, opt);
  }
  auto built = std::make_shared<const Schedule>(std::move(s));
  if (cached) schedules_.emplace(key, built);
  return built;
}

void AlgorithmChoice::set_deterministic(bool on) {
  config_.deterministic = on;
  schedules_.clear();
}

std::string AlgorithmChoice::explain(const CollectiveArgs& a, const Algorithm* forced, const char* chosen,
                                     double* predicted_us) {
  *predicted_us = -1;
  const std::string c = chosen ? chosen : "";
  const bool modelled = a.kind == CollectiveKind::kAllReduce || a.kind == CollectiveKind::kReduceScatter ||
                        a.kind == CollectiveKind::kAllGather;
  const uint64_t per = a.kind == CollectiveKind::kAllReduce || !modelled ? 1 : static_cast<uint64_t>(m_.size);
  const uint64_t bytes = a.count * dtype_size(a.dtype) * per;
  const Algorithm* row = find_algorithm(c, a.kind);
  std::string why;
  if (c == "det") return deterministic_explanation(a.kind, forced ? forced->id : "");
  else if (forced && c == forced->id) why = fmt::format("forced by WEFT_ALGO / weftCommSetAlgorithm ('{}')", forced->id);
  else if (row && row->native())
    why = fmt::format("native row '{}' ({}) of the shared-memory latency path took it: the first native row whose eligibility "
                      "agrees, tried before any schedule (WEFT_DIRECT_BYTES, WEFT_DIRECT_PIECE_BYTES, weftMemAlloc windows)",
                      row->id, row->name);
  else if (c == "f32acc" && sums_in_f32(a))
    why = a.dtype == DataType::kFloat32
              ? fmt::format("WEFT_WIRE_DTYPE={}: float32 sums cross at 16 bits, summed in float32, rounded once", config_.wire_dtype)
              : std::string("16-bit sums accumulate in float32 and round once");
  else if (modelled && m_.num_nodes > 1) why = "the cost model's fastest across nodes (weft-topo plan)";
  else why = fmt::format("the measured crossover for {} ranks on {} node(s) (docs/ALGORITHMS.md)", m_.size, m_.num_nodes);
  if (!modelled || m_.size < 2) return why;
  try {
    const int nodes = std::max(1, m_.num_nodes);
    auto plans = rank_plans(topo::make_uniform_cluster(summary(), nodes, std::max(1, m_.size / nodes)), a.kind, bytes,
                            model(), config_.slice_bytes);
    std::vector<std::string> parts;
    for (const auto& p : plans) {
      parts.push_back(fmt::format("{} {:.1f} us", p.plan.algorithm, p.predicted_us));
      if (p.plan.algorithm == c) *predicted_us = p.predicted_us;
    }
    if (!parts.empty()) why += fmt::format("; cost model's predictions for {} B: {}", bytes, fmt::join(parts, ", "));
  } catch (const std::exception& e) {
    why += fmt::format("; no cost model prediction ({})", e.what());
  }
  return why;
}

std::optional<DataType> AlgorithmChoice::wire() const {
  DataType t;
  if (config_.wire_dtype.empty() || !parse_dtype(config_.wire_dtype, &t)) return std::nullopt;
  return t;
}

bool AlgorithmChoice::sums_in_f32(const CollectiveArgs& a) const {
  if (a.kind != CollectiveKind::kAllReduce || m_.size < 2) return false;
  return weft::sums_in_f32(a.dtype, a.op) ||
         (a.dtype == DataType::kFloat32 && wire() && (a.op == RedOp::kSum || a.op == RedOp::kAvg));
}

// Across nodes (WEFT_ALGO unset) the cost model picks the all-reduce, reduce-scatter and all-gather
// algorithm over a uniform cluster view of this node type: the same function as `weft-topo plan`.
const Algorithm* AlgorithmChoice::planned(CollectiveKind kind, uint64_t bytes) {
  const auto key = std::make_pair(static_cast<int>(kind), bytes);
  auto it = planned_.find(key);
  if (it == planned_.end()) {
    if (planned_.size() > 4096) planned_.clear();
    std::string id;
    try {
      id = choose_algorithm(summary(), m_.num_nodes, std::max(1, m_.size / m_.num_nodes), kind, bytes, model(),
                            config_.slice_bytes);
    } catch (const std::exception& e) {
      WEFT_LOG_DEBUG("cost model unavailable ({}); using the default {}", e.what(), collective_name(kind));
    }
    WEFT_LOG_DEBUG("cost model: {} of {} bytes on {} nodes ({} ranks on {} cores of a machine) -> '{}'",
                   collective_name(kind), bytes, m_.num_nodes, m_.host_ranks, m_.host_cores, id);
    it = planned_.emplace(key, id).first;
  }
  return it->second.empty() ? nullptr : find_algorithm(it->second, kind);
}

const topo::NodeSummary& AlgorithmChoice::summary() {
  if (!node_summary_) node_summary_ = std::make_unique<topo::NodeSummary>(topo::summarize(topo::load_topology()));
  return *node_summary_;
}

topo::CostModel AlgorithmChoice::model() const {
  topo::CostModel model = topo::CostModel::from_env();
  if (model.host.ranks == 0) model.host.ranks = m_.host_ranks;
  if (model.host.cores == 0) model.host.cores = m_.host_cores;
  return model;
}

std::vector<std::vector<int>> AlgorithmChoice::uniform_nodes() const {
  const int nodes = std::max(1, m_.num_nodes);
  if (m_.size % nodes != 0 || static_cast<int>(m_.node_of_rank.size()) != m_.size) return {};
  std::vector<std::vector<int>> ranks_of(nodes);
  for (int r = 0; r < m_.size; ++r) {
    const int n = m_.node_of_rank[r];
    if (n < 0 || n >= nodes) return {};
    ranks_of[n].push_back(r);
  }
  for (const auto& v : ranks_of)
    if (static_cast<int>(v.size()) != m_.size / nodes) return {};
  return ranks_of;
}

// Across nodes, the ring that the planner explains (planned_ring over a uniform cluster of this
// node type, whose rank n*ranks_per_node + l is the l-th rank of the n-th node) mapped onto the
// ranks as they are numbered here: the l-th lowest rank of node n. Empty (the schedules' own
// node_order) on one node, when the nodes hold different numbers of ranks, or when the topology
// cannot be read. Like the choice itself, it assumes that every node is of this node's type, so
// that every rank computes the same ring.
const std::vector<int>& AlgorithmChoice::ring() {
  if (ring_done_) return ring_;
  ring_done_ = true;
  const int nodes = m_.num_nodes;
  const auto ranks_of = uniform_nodes();
  if (nodes <= 1 || ranks_of.empty()) return ring_;
  const int rpn = m_.size / nodes;
  try {
    std::vector<int> ring;
    for (int u : planned_ring(summary(), nodes, rpn)) ring.push_back(ranks_of.at(u / rpn).at(u % rpn));
    ring_ = std::move(ring);
    WEFT_LOG_DEBUG("planned ring over {} nodes: {}", nodes, fmt::join(ring_, " "));
  } catch (const std::exception& e) {
    WEFT_LOG_DEBUG("planned ring unavailable ({}); rings visit the nodes in order", e.what());
  }
  return ring_;
}

// The packed spanning trees the planner explains (planned_forest over a uniform cluster of this
// node type and the cost model's fabric), mapped onto the ranks as ring() maps the ring. Empty
// (the schedule's chains) when the nodes hold different numbers of ranks, above
// topo::kForestExactRanks ranks, or when the topology cannot be read.
const std::vector<topo::WeightedTree>& AlgorithmChoice::forest() {
  if (forest_done_) return forest_;
  forest_done_ = true;
  const int nodes = std::max(1, m_.num_nodes);
  const auto ranks_of = uniform_nodes();
  if (ranks_of.empty()) return forest_;
  const int rpn = m_.size / nodes;
  try {
    std::vector<topo::WeightedTree> out;
    for (const topo::WeightedTree& t : planned_forest(summary(), nodes, rpn, model())) {
      std::vector<int> parent(m_.size, -1);
      for (int u = 0; u < m_.size; ++u)
        if (t.tree.parent[u] >= 0) parent[ranks_of[u / rpn][u % rpn]] = ranks_of[t.tree.parent[u] / rpn][t.tree.parent[u] % rpn];
      out.push_back({topo::tree_from_parents(parent), t.share});
    }
    forest_ = std::move(out);
    WEFT_LOG_DEBUG("planned forest over {} nodes: {} trees", nodes, forest_.size());
  } catch (const std::exception& e) {
    WEFT_LOG_DEBUG("planned forest unavailable ({}); forest runs the nodes' chains", e.what());
  }
  return forest_;
}

}  // namespace weft
