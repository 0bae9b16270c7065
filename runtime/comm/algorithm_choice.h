// Which algorithm runs a call, and its schedule: the user's choice (WEFT_ALGO,
// weftCommSetAlgorithm), else across nodes the cost model's (the same function as
// `weft-topo plan`), else the measured size crossovers (default_algorithm). Schedules are cached
// per call shape, so a choice is made once per shape.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/collective.h"
#include "runtime/base/config.h"
#include "runtime/comm/membership.h"

namespace weft {
namespace topo {
struct NodeSummary;
struct CostModel;
}

class AlgorithmChoice {
 public:
  AlgorithmChoice(CommConfig& config, const Membership& members);
  ~AlgorithmChoice();
  // The schedule of `a`: the forced row's where it is a schedule row, else the automatic choice.
  // Shared: a schedule in flight keeps its own even if the cache is cleared meanwhile.
  std::shared_ptr<const Schedule> schedule_for(const CollectiveArgs& a, const Algorithm* forced);
  // Deterministic mode (docs/DETERMINISM.md) on or off for the schedules built from now on (the
  // communicator's config changes with it); forgets the cached schedules.
  void set_deterministic(bool on);
  // Why `chosen` ran `a` (logged for the first call of each collective and size class at
  // WEFT_LOG_LEVEL=info): the user's choice, a native row that took it, the cost model's choice
  // across nodes or the measured crossovers, with the model's predicted times of the candidates.
  // *predicted_us: the chosen algorithm's prediction, -1 where the model has none.
  std::string explain(const CollectiveArgs& a, const Algorithm* forced, const char* chosen, double* predicted_us);

 private:
  // WEFT_WIRE_DTYPE as a type (none: float32 on the wire).
  std::optional<DataType> wire() const;
  // Whether `a` is an all-reduce whose sums accumulate in float32 and round once (the f32acc
  // algorithm, unless WEFT_ALGO names another): float16/bfloat16 sums and averages, and float32
  // ones with a wire type, on more than one rank.
  bool sums_in_f32(const CollectiveArgs& a) const;
  const Algorithm* planned(CollectiveKind kind, uint64_t bytes);
  // The ranks of every node (by node index, ascending) when every node holds the same number of
  // ranks; empty otherwise.
  std::vector<std::vector<int>> uniform_nodes() const;
  const std::vector<int>& ring();             // AlgoOptions::ring: the planned ring across nodes
  const std::vector<topo::WeightedTree>& forest();  // AlgoOptions::forest: the planned packed trees
  const topo::NodeSummary& summary();          // this node's topology (loaded once)
  topo::CostModel model() const;               // WEFT_COST_* with this job's ranks and cores

  CommConfig& config_;  // the communicator's
  const Membership& m_;
  std::map<std::tuple<int, uint64_t, int, int, int, bool, const Algorithm*>, std::shared_ptr<const Schedule>> schedules_;
  std::map<std::pair<int, uint64_t>, std::string> planned_;  // cost model's choice per (kind, bytes)
  std::unique_ptr<topo::NodeSummary> node_summary_;          // this node's topology, for the cost model
  std::vector<int> ring_;
  bool ring_done_ = false;
  std::vector<topo::WeightedTree> forest_;
  bool forest_done_ = false;
};

}  // namespace weft
