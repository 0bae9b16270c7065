// The one table of algorithms. WEFT_ALGO, the planner and weft-topo plan all read it.
#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/ring.h"
#include "collectives/collective.h"
#include "runtime/error.h"

namespace weft {

const std::vector<Algorithm>& algorithm_table() {
  using K = CollectiveKind;
  static const std::vector<Algorithm> table = {
      {"ring", "Pipelined ring: reduce-scatter then all-gather around r -> r+1, sliced so that the "
               "reduction of one slice overlaps the transfer of the next.",
       {K::kAllReduce}, build_ring_allreduce},
      {"dissemination", "Dissemination barrier: ceil(log2 n) rounds of zero-byte messages to r+2^k.",
       {K::kBarrier}, build_dissemination_barrier},
  };
  return table;
}

const Algorithm* find_algorithm(std::string_view id, CollectiveKind kind) {
  for (auto& a : algorithm_table()) {
    if (id != a.id) continue;
    for (auto k : a.kinds)
      if (k == kind) return &a;
  }
  return nullptr;
}

std::vector<const Algorithm*> algorithms_for(CollectiveKind kind) {
  std::vector<const Algorithm*> out;
  for (auto& a : algorithm_table())
    for (auto k : a.kinds)
      if (k == kind) out.push_back(&a);
  return out;
}

const Algorithm* default_algorithm(CollectiveKind kind, uint64_t /*bytes*/, int /*nranks*/) {
  auto all = algorithms_for(kind);
  return all.empty() ? nullptr : all.front();
}

Schedule build_schedule(const Algorithm& algo, const CollectiveArgs& args, int rank, int nranks,
                        const AlgoOptions& opt) {
  ScheduleBuilder b(rank, nranks, args.dtype, args.op);
  algo.build(b, args, opt);
  Schedule s = b.finish();
  s.validate(send_bytes(args, rank, nranks), recv_bytes(args, rank, nranks));
  return s;
}

}  // namespace weft
