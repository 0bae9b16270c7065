// The native rows of the shared-memory direct path (runtime/transport/shm/shm_direct.*): their
// sizes, eligibility and the cost model's predictions. Their runners are bound at the runtime
// layer (runtime/comm/native_rows.cc); here is only what the table, the planner and the tools
// need to know of them.
#include <algorithm>
#include <cmath>

#include "collectives/algorithms/builtin.h"
#include "collectives/planner.h"
#include "topology/flows.h"

namespace weft {

namespace {

// Where all-reduces can go in pieces, the largest one taken in one round. A round has every rank
// read every slot of the whole buffer (n x the bytes), a piece's two rounds only its share of each
// slot and the others' shares: at 3, 4 and 8 ranks on 2 cores the pieces were faster from 64 KiB
// (8 ranks 64 KiB: 25-31 us against 48-63; 4 ranks 11-12 against 15-23) and even at 32 KiB
// (6 Dec, WEFT_DIRECT_BYTES 32768 against the automatic 262144).
constexpr uint64_t kAllReduceRoundBytesWithPieces = 32 << 10;

bool shared_memory_path(const CallShape& s) { return s.node_memory && s.nranks >= 2; }

// The slowest link between two ranks of a one-node view (the path the slots are read over).
bool node_link(const PlanInput& in, topo::LinkCost& worst) {
  const int p = in.view.size();
  if (p < 2 || in.view.num_nodes() != 1) return false;
  worst = topo::rank_edge(in.view, in.model, 0, 1, false);
  for (int r = 2; r < p; ++r) {
    const topo::LinkCost e = topo::rank_edge(in.view, in.model, 0, r, false);
    worst.alpha_us = std::max(worst.alpha_us, e.alpha_us);
    if (e.gbs > 0 && (worst.gbs <= 0 || e.gbs < worst.gbs)) worst.gbs = e.gbs;
  }
  return true;
}

// waits rounds of the link's latency, bytes through memory at its bandwidth.
void fill(Prediction& out, const topo::LinkCost& e, double waits, double bytes) {
  out.lat_us = waits * e.alpha_us;
  out.xfer_us = topo::transfer_us(bytes, e.gbs);
  out.steps = waits;
  out.b = {};
  out.b.add(e);
}

DirectLimits plan_limits(const PlanInput& in) {
  return direct_limits(-1, -1, in.model.host.oversubscribed());
}

}  // namespace

DirectLimits direct_limits(int64_t direct_bytes, int64_t piece_bytes, bool oversubscribed) {
  // Where ranks outnumber cores every round of a scheduled algorithm waits for a core, so the
  // direct path (one round) pays off up to larger sizes, and all-reduces of any size go in
  // pieces of two rounds each (docs/PERFORMANCE.md, "Latency path").
  DirectLimits l;
  l.one_round = static_cast<uint64_t>(direct_bytes >= 0 ? direct_bytes : oversubscribed ? 256 << 10 : 32 << 10);
  l.piece = static_cast<uint64_t>(piece_bytes >= 0 ? piece_bytes : oversubscribed ? 256 << 10 : 0);
  l.allreduce_round = l.piece ? std::min(l.one_round, kAllReduceRoundBytesWithPieces) : l.one_round;
  return l;
}

bool direct_eligible(const CallShape& s) {
  if (!shared_memory_path(s)) return false;
  switch (s.kind) {
    case CollectiveKind::kAllReduce: return s.bytes <= s.limits.allreduce_round;
    case CollectiveKind::kReduce:
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kAllGather: return s.bytes <= s.limits.one_round;
    case CollectiveKind::kBarrier: return true;
    default: return false;
  }
}

bool pieces_eligible(const CallShape& s) {
  return shared_memory_path(s) && s.kind == CollectiveKind::kAllReduce && s.limits.piece > 0 &&
         s.bytes > s.limits.allreduce_round;
}

bool window_eligible(const CallShape& s) {
  return shared_memory_path(s) && s.kind == CollectiveKind::kAllReduce && s.windows > 0 && s.bytes > s.limits.allreduce_round;
}

// One round: every rank copies its contribution into its slot, posts, waits once, and reads the
// slots it needs (all of them for all-reduce, all-gather and the reduce's root; the root's for
// broadcast): one wait, 1 + (reads) x the contribution through memory.
bool predict_direct(const PlanInput& in, Prediction& out) {
  topo::LinkCost e;
  if (!node_link(in, e)) return false;
  const int p = in.view.size();
  double contribution = in.bytes, reads = p;
  switch (in.coll) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kReduce: break;
    case CollectiveKind::kAllGather: contribution = in.bytes / p; break;  // in.bytes: the gathered buffer
    case CollectiveKind::kBroadcast: reads = 1; break;
    case CollectiveKind::kBarrier: contribution = 0; break;
    default: return false;
  }
  fill(out, e, 1, contribution * (1 + reads));
  const DirectLimits l = plan_limits(in);
  out.reasons.push_back(fmt::format(
      "one round over this node's shared memory: each rank copies its {:.0f} B into its slot, posts, waits once and "
      "reads {} slot(s) straight into its output (taken up to {} B by default, WEFT_DIRECT_BYTES)",
      contribution, static_cast<int>(reads), in.coll == CollectiveKind::kAllReduce ? l.allreduce_round : l.one_round));
  return true;
}

// Pieces of piece bytes, two rounds each: publish the piece, reduce this rank's share from every
// slot, publish it, gather the others' shares: two waits a piece, ~3 x the bytes through memory.
bool predict_pieces(const PlanInput& in, Prediction& out) {
  topo::LinkCost e;
  if (in.coll != CollectiveKind::kAllReduce || !node_link(in, e)) return false;
  const DirectLimits l = direct_limits(-1, -1, true);  // the automatic piece where ranks outnumber cores
  const double pieces = std::max(1.0, std::ceil(in.bytes / static_cast<double>(l.piece)));
  fill(out, e, 2 * pieces, 3 * in.bytes);
  out.reasons.push_back(fmt::format("{:.0f} piece(s) of {} B over this node's shared memory, two rounds each (runs by "
                                    "default only where ranks outnumber cores)", pieces, l.piece));
  return true;
}

// weftMemAlloc windows on every rank: one round says where the buffers are, each rank reduces its
// 1/n share straight from every rank's send buffer into every receive buffer, one more round:
// two waits, one read and one write per byte.
bool predict_window(const PlanInput& in, Prediction& out) {
  topo::LinkCost e;
  if (in.coll != CollectiveKind::kAllReduce || !node_link(in, e)) return false;
  fill(out, e, 2, 2 * in.bytes);
  out.reasons.push_back("runs only where every rank's buffers are weftMemAlloc windows: no copies, one read and one "
                        "write per byte");
  return true;
}

}  // namespace weft
