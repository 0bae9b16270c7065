// Double binary tree all-reduce (as NCCL builds it, over the ranks in node order: rank_tree). The
// buffer is split in two halves; half t is reduced up tree t to its root and broadcast back down
// the same tree. Both halves are cut into slices that pipeline: a rank forwards slice j up as soon
// as it has combined its own slice j with its children's, and forwards slice j down as soon as it
// arrives.
//
// Determinism: every rank combines slice j as own OP child0 OP child1 (children ascending); the
// root's result is the only one that survives: it is broadcast, so every rank ends with the
// root's bits, and the order of combination does not depend on timing.
//
// Flow control: slices are slice_bytes / topo::kTreeSliceDivisor, and a rank's up-send of slice j
// waits until slice j - kTreeWindowSlices has come back down to it (an end-to-end window per tree;
// see topology/trees.h for why).
#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

#include "collectives/algorithms/builtin.h"
#include "collectives/planner.h"
#include "collectives/algorithms/slicing.h"
#include "collectives/algorithms/tree.h"

namespace weft {

topo::Tree rank_tree(const AlgoOptions& opt, int n, int which) {
  return topo::relabel(topo::double_binary_trees(n).at(which), node_order(opt, n));
}

void build_tree_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks();
  const uint64_t es = dtype_size(a.dtype);
  if (trivial_allreduce(b, a)) return;
  const Buf own = a.in_place ? Buf::kRecv : Buf::kSend;
  uint64_t scratch = 0;
  for (int t = 0; t < 2; ++t) {
    const topo::Tree tree = rank_tree(opt, n, t);
    const uint64_t first = part_offset(a.count, 2, t), count = part_offset(a.count, 2, t + 1) - first;
    scratch = build_tree_piece(b, a, {&tree, count, true, true, {own, first * es}, {Buf::kRecv, first * es}, true},
                               opt.slice_bytes / topo::kTreeSliceDivisor, scratch);
  }
  b.need_scratch(scratch);
}

uint64_t build_tree_piece(ScheduleBuilder& b, const CollectiveArgs& a, const TreePiece& p, uint64_t slice_bytes,
                          uint64_t scratch) {
  const int r = b.rank();
  const uint64_t es = dtype_size(a.dtype);
  if (p.count == 0) return scratch;
  const topo::Tree& tree = *p.tree;
  const SlicedRange piece(0, p.count, es, slices_for(p.count, es, std::max<uint64_t>(slice_bytes, es)));
  const int parent = tree.parent[r];
  const std::vector<int>& kids = tree.children[r];
  const uint64_t kSlots = 4;
  std::vector<SlotRing> slots;
  if (p.up)
    for (size_t k = 0; k < kids.size(); ++k) {
      slots.emplace_back(scratch, piece.max_bytes(), kSlots);
      scratch = slots.back().end();
    }
  // Partial sums of an interior rank that are not kept (reduce-scatter): their own slots, free
  // again once sent up.
  const bool acc_slots = p.up && !p.acc_in_result && parent >= 0 && !kids.empty();
  SlotRing accs(scratch, piece.max_bytes(), kSlots);
  if (acc_slots) scratch = accs.end();
  auto at = [](Ref base, uint64_t off) { return Ref{base.buf, base.offset + off}; };
  std::vector<StepId> down;  // the receive of each slice from the parent, for the window
  for (uint64_t j = 0; j < piece.slices; ++j) {
    const uint64_t off = piece.off(j), bytes = piece.bytes(j);
    if (!bytes) continue;
    const Ref res = at(p.result, off), own = at(p.own, off);
    StepId done = kNoStep;
    Ref from = res;  // what goes down to the children
    if (p.up) {
      Ref acc = own;
      StepId acc_ready = kNoStep;
      SlotRing::Slot mine{};
      Ref target = res;
      StepId target_free = kNoStep;
      if (acc_slots) {
        mine = accs.take();
        target = mine.ref, target_free = mine.last_user;
      }
      for (size_t k = 0; k < kids.size(); ++k) {
        auto slot = slots[k].take();
        const StepId rv = b.recv(kids[k], slot.ref, bytes, {slot.last_user});
        acc_ready = k == 0 ? b.reduce3(target, own, slot.ref, bytes, {rv, target_free})
                           : b.reduce(target, slot.ref, bytes, {rv, acc_ready});
        acc = target;
        slots[k].release(slot, acc_ready);
      }
      if (parent < 0) {
        if (kids.empty() && !(own.buf == res.buf && own.offset == res.offset)) acc_ready = b.copy(res, own, bytes);
        done = acc_ready;
        if (a.op == RedOp::kAvg) done = b.avg(res, bytes, {done});
      } else {
        const StepId sent = b.send(parent, acc, bytes, {acc_ready});
        if (acc_slots) accs.release(mine, sent);
        if (p.down) {
          if (down.size() >= static_cast<size_t>(topo::kTreeWindowSlices))
            b.add_dep(sent, down[down.size() - topo::kTreeWindowSlices]);
          done = b.recv(parent, res, bytes, {sent});
          down.push_back(done);
        }
      }
    } else if (parent < 0) {
      from = own;
    } else {
      done = b.recv(parent, res, bytes);
    }
    if (p.down)
      for (int kid : kids) b.send(kid, from, bytes, {done});
  }
  return scratch;
}

}  // namespace weft

// ---- Prediction ------------------------------------------------------------------------------
// The double binary tree over the ranks in node order (base.trees, as rank_tree builds it): half
// the buffer up and down each tree, every slice pipelined, so each link carries its edges' bytes
// at once and the busiest NIC sets the pace once the pipeline is full. Also the model's rooted
// collectives (one direction).
namespace weft {

bool predict_tree(const PlanInput& in, Prediction& out) {
  using namespace topo;
  const bool allreduce = in.coll == CollectiveKind::kAllReduce;
  const bool rooted = in.coll == CollectiveKind::kBroadcast || in.coll == CollectiveKind::kReduce;
  if (!allreduce && !rooted) return false;
  const ClusterView& view = in.view;
  const CostModel& m = in.model;
  const double S = in.bytes;
  const int p = view.size();
  const double half = S / 2;
  std::vector<Flow> flows;
  int depth = 0;
  for (const Tree& t : in.base.trees) {
    depth = std::max(depth, t.depth());
    for (int r = 0; r < p; ++r) {
      if (t.parent[r] < 0) continue;
      if (allreduce || in.coll == CollectiveKind::kReduce) flows.push_back({r, t.parent[r], half});
      if (allreduce || in.coll == CollectiveKind::kBroadcast) flows.push_back({t.parent[r], r, half});
    }
  }
  StageCost c = stage_cost(view, m, flows, in.net);
  if (c.b.gbs <= 0) c.b.add(m.edge(Path{PathClass::kSelf, Fabric::kNone, 0, 0}));
  // A pipeline of k slices per half (slices of slice_bytes / kTreeSliceDivisor): k - 1 slices
  // at the busiest NIC's pace, plus one slice's trip along the slowest root-to-leaf path (up,
  // then down again for the all-reduce). With one slice that trip is the whole time: each hop
  // waits for the previous one. The window (kTreeWindowSlices slices in flight per tree, trees.h)
  // caps the pace at a window per round trip of a slice; on that trip a hop's link is shared by
  // the n - 1 other tree edges that leave its sender the same way (to its node, or out of it
  // through the same NIC) or enter its receiver so, each moving its own slices. Counting all of
  // them for the whole slice (n x its time alone) over-predicts the event level (0.84x at 1024
  // GPUs), as they are not all in flight at every moment; n - 1/2 is within 6% of it from 8 to
  // 1024 GPUs (8 H100 per node, a 400 Gbit/s NIC each, 256 MiB).
  const double k = std::max(1.0, std::ceil(half / (in.slice_bytes / kTreeSliceDivisor))), slice = half / k;
  // Which way a rank's edge leaves it: "" inside its node, else its NIC's id ("#" so that a rank
  // without a NIC id still differs from the node-internal way).
  auto exit_of = [&](int from, int to) {
    return view.node_of_rank[from] == view.node_of_rank[to] ? std::string() : view.bindings[from].nic + "#";
  };
  std::vector<std::unordered_map<std::string, int>> out_n(p), in_n(p);
  for (const Flow& f : flows) ++out_n[f.from][exit_of(f.from, f.to)], ++in_n[f.to][exit_of(f.to, f.from)];
  double path = 0, path_alpha = 0, trip_shared = 0;
  for (const Tree& t : in.base.trees)
    for (int r = 0; r < p; ++r) {
      double us = 0, alpha = 0, shared = 0;
      for (int u = r; t.parent[u] >= 0; u = t.parent[u]) {
        const int v = t.parent[u];
        const LinkCost e = rank_edge(view, m, u, v, false);
        const double one = transfer_us(slice, e.gbs);
        const int n = std::max({1, out_n[u][exit_of(u, v)], in_n[v][exit_of(v, u)], out_n[v][exit_of(v, u)],
                                in_n[u][exit_of(u, v)]});
        us += one;
        alpha += e.alpha_us;
        shared += e.alpha_us + (n - 0.5) * one;
      }
      path = std::max(path, us);
      path_alpha = std::max(path_alpha, alpha);
      trip_shared = std::max(trip_shared, shared);
    }
  const int trips = allreduce ? 2 : 1;
  const double windowed = allreduce ? k / kTreeWindowSlices * 2 * trip_shared : 0;
  const double xfer = std::max({c.us, (k - 1) / k * c.us + trips * path, windowed}), lat = trips * depth * c.b.alpha;
  int crossing = 0;
  for (const Flow& f : flows) crossing += view.node_of_rank[f.from] != view.node_of_rank[f.to];
  out.xfer_us = xfer;
  out.lat_us = lat;
  out.b = c.b;
  out.reasons = {
      fmt::format("two complementary binary trees over {} ranks in node order (depth {}), half the data each", p, depth),
      fmt::format("{} of their {} edge directions cross between nodes; the busiest NIC carries {:.2f}x the buffer each way",
                  crossing, flows.size(), S > 0 ? c.nic_bytes / S : 0.0),
      windowed > c.us * 1.0001 && windowed >= xfer
          ? fmt::format("{:.0f} slices per half, {} in flight per tree: the window's round trip ({:.0f} us) sets the time, "
                        "not the NIC", k, kTreeWindowSlices, 2 * trip_shared)
      : xfer > c.us * 1.0001
          ? fmt::format("{:.0f} slice{} per half: a slice's trip {} the deepest path ({:.0f} us) sets the time, not the NIC",
                        k, k == 1 ? "" : "s", allreduce ? "up and down" : "along", trips * path)
          : std::string("latency grows with log2(ranks) instead of ranks")};
  out.steps = trips * depth;
  return true;
}

}  // namespace weft
