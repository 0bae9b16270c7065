// The one table of algorithms. WEFT_ALGO, the planner and weft-topo plan all read it. A row:
// {id, description, kinds, build (nullptr: a native row, run by the runtime), name (as plans print
// it; nullptr: the id), predict (the cost model's formula, collectives/planner.h; nullptr: no
// prediction), eligible (nullptr: any call of its kinds)}.
#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/ring.h"
#include "collectives/collective.h"
#include "collectives/planner.h"
#include "runtime/base/error.h"

namespace weft {

const std::vector<Algorithm>& algorithm_table() {
  using K = CollectiveKind;
  static const std::vector<Algorithm> table = {
      // Native rows: the shared-memory direct path (runtime/transport/shm/shm_direct.*), tried in
      // this order before any schedule where they take the call (native_chain).
      {"window", "All-reduce over weftMemAlloc windows: one round says where every rank's buffers are; when all are "
                 "windows each rank reduces its 1/n share straight from every send buffer into every receive buffer "
                 "(no copies), else every rank declines alike and the next row runs.",
       {K::kAllReduce}, nullptr, "shared_window", predict_window, window_eligible},
      {"direct", "One round over the node's shared memory: every rank copies its input into its slot, posts a flag and "
                 "reads the slots it needs straight into its output (up to WEFT_DIRECT_BYTES).",
       {K::kAllReduce, K::kReduce, K::kBroadcast, K::kAllGather, K::kBarrier}, nullptr, "one_round", predict_direct,
       direct_eligible},
      {"pieces", "All-reduce in pieces of WEFT_DIRECT_PIECE_BYTES over the node's shared memory, two rounds each (reduce "
                 "this rank's share from every slot, then copy the others'); by default where ranks outnumber cores.",
       {K::kAllReduce}, nullptr, "direct_pieces", predict_pieces, pieces_eligible},
      {"ring", "Pipelined ring: reduce-scatter then all-gather around r -> r+1, sliced so that the "
               "reduction of one slice overlaps the transfer of the next; opt.channels independent rings "
               "(odd ones reversed) over parts of the buffer.",
       {K::kAllReduce}, build_ring_allreduce, "ring", predict_ring, nullptr},
      {"tree", "Double binary tree: each half of the buffer is reduced up one of two complementary "
               "binary trees and broadcast back down it, pipelined in slices.",
       {K::kAllReduce}, build_tree_allreduce, "double_binary_tree", predict_tree, nullptr},
      {"rhd", "Recursive halving-doubling (Rabenseifner): reduce-scatter by recursive halving, all-gather "
              "by recursive doubling; extra ranks of a non-power-of-two fold into partners first.",
       {K::kAllReduce}, build_rhd_allreduce, "halving_doubling", predict_rhd, nullptr},
      {"hier", "Hierarchical: ring reduce-scatter inside each node, ring all-reduce of each shard across "
               "nodes along rails (same local index, all rails at once), ring all-gather inside each node; "
               "the flat ring unless every node has the same number (>= 2) of ranks and there are >= 2 nodes.",
       {K::kAllReduce}, build_hier_allreduce, "hierarchical", predict_hier, nullptr},
      {"forest", "Packed spanning trees: every rank's shard reduced up and sent down its own trees (the planner's "
                 "packing over the job's links, close to the worst cut's bound; ForestColl/Blink), slice by slice.",
       {K::kAllReduce}, build_forest_allreduce, "packed_trees", predict_forest, forest_eligible},
      {"f32acc", "Direct reduce-scatter then all-gather whose sums of 16-bit pieces (float16, bfloat16, or float32 "
                 "with WEFT_WIRE_DTYPE) are accumulated in float32 in rank order and rounded once; chosen by type, "
                 "not by speed (other types: the same exchange in their own type).",
       {K::kAllReduce}, build_f32acc_allreduce, "f32_accumulate", predict_f32acc},
      {"ring", "Pipelined ring reduce-scatter: block c travels c+1 -> ... -> c, combined on the way.",
       {K::kReduceScatter}, build_ring_reducescatter, "ring", predict_ring, nullptr},
      {"ring", "Pipelined ring all-gather: every block travels n-1 hops around r -> r+1.",
       {K::kAllGather}, build_ring_allgather, "ring", predict_ring, nullptr},
      {"hier", "Hierarchical reduce-scatter: ring reduce-scatter inside each node of the blocks of each rail, "
               "then ring reduce-scatter of the node sums across nodes along rails (all rails at once), the "
               "phases overlapping slice by slice; the flat ring unless nodes are equal (>= 2 of >= 2 ranks).",
       {K::kReduceScatter}, build_hier_reducescatter, "hierarchical", predict_hier, nullptr},
      {"hier", "Hierarchical all-gather: ring all-gather across nodes along rails (all rails at once), then ring "
               "all-gather inside each node of what every rail gathered, overlapping slice by slice; the flat "
               "ring unless nodes are equal (>= 2 of >= 2 ranks).",
       {K::kAllGather}, build_hier_allgather, "hierarchical", predict_hier, nullptr},
      {"forest", "Packed spanning trees reduce-scatter: every rank's block reduced up the reversed trees to it.",
       {K::kReduceScatter}, build_forest_reducescatter, "packed_trees", predict_forest, forest_eligible},
      {"forest", "Packed spanning trees all-gather: every rank's block sent down its trees from it.",
       {K::kAllGather}, build_forest_allgather, "packed_trees", predict_forest, forest_eligible},
      {"chain", "Pipelined chain broadcast root -> root+1 -> ... -> root-1.", {K::kBroadcast}, build_chain_broadcast, nullptr, nullptr, nullptr},
      {"binomial", "Binomial-tree broadcast: ceil(log2 n) rounds, slices pipelined.", {K::kBroadcast},
       build_binomial_broadcast, nullptr, nullptr, nullptr},
      {"chain", "Pipelined chain reduce root-1 -> root-2 -> ... -> root; partial results in scratch.",
       {K::kReduce}, build_chain_reduce, nullptr, nullptr, nullptr},
      {"binomial", "Binomial-tree reduce: ceil(log2 n) levels, non-root accumulators in scratch.", {K::kReduce},
       build_binomial_reduce, nullptr, nullptr, nullptr},
      {"pairwise", "Pairwise all-to-all: n-1 rounds exchanging with r+k / r-k; in place through scratch.",
       {K::kAllToAll}, build_pairwise_alltoall, nullptr, nullptr, nullptr},
      {"pairwise", "Pairwise all-to-all with unequal splits: the same rounds, one message per peer of its own size "
                   "(zero bytes for a zero count, so that a count the peer disagrees with is caught); not in place.",
       {K::kAllToAllv}, build_pairwise_alltoallv, nullptr, nullptr, nullptr},
      {"dissemination", "Dissemination barrier: ceil(log2 n) rounds of zero-byte messages to r+2^k.",
       {K::kBarrier}, build_dissemination_barrier, nullptr, nullptr, nullptr},
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

// Crossovers measured with benchmarks/algo_crossover (docs/ALGORITHMS.md has the tables): latency-
// bound sizes go to the logarithmic algorithms, bandwidth-bound ones to the pipelined ring/chain.
const Algorithm* default_algorithm(CollectiveKind kind, uint64_t bytes, int nranks) {
  const char* id = nullptr;
  switch (kind) {
    case CollectiveKind::kAllReduce: id = nranks > 1 && bytes <= kDefaultSliceBytes ? "rhd" : "ring"; break;
    case CollectiveKind::kBroadcast: id = bytes < (32u << 10) ? "binomial" : "chain"; break;
    case CollectiveKind::kReduce: id = bytes <= (256u << 10) ? "binomial" : "chain"; break;
    default: break;
  }
  if (id)
    if (const Algorithm* a = find_algorithm(id, kind)) return a;
  for (const Algorithm* a : algorithms_for(kind))
    if (!a->native()) return a;
  return nullptr;
}

const std::vector<const Algorithm*>& native_rows(CollectiveKind kind) {
  static const auto by_kind = [] {
    std::vector<std::vector<const Algorithm*>> v(kNumCollectiveKinds);
    for (const Algorithm& a : algorithm_table())
      if (a.native())
        for (CollectiveKind k : a.kinds) v[static_cast<int>(k)].push_back(&a);
    return v;
  }();
  return by_kind[static_cast<int>(kind)];
}

Chain native_chain(const CallShape& s, const Algorithm* forced) {
  Chain c;
  if (forced && !forced->native()) return c;  // a forced schedule row: no native row runs
  if (forced && forced->takes(s)) c.add(forced);
  for (const Algorithm* a : native_rows(s.kind))
    if (a != forced && a->takes(s)) c.add(a);
  return c;
}

Schedule build_schedule(const Algorithm& algo, const CollectiveArgs& args, int rank, int nranks,
                        const AlgoOptions& opt) {
  if (algo.native()) fail(ErrorCode::kInternalError, "algorithm '{}' is a native row: it has no schedule", algo.id);
  ScheduleBuilder b(rank, nranks, args.dtype, args.op);
  algo.build(b, args, opt);
  Schedule s = b.finish();
  s.algorithm = algo.id;
  s.validate(send_bytes(args, rank, nranks), recv_bytes(args, rank, nranks));
  return s;
}

}  // namespace weft
