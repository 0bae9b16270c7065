// Packed spanning trees (`forest`): every rank's shard of the buffer travels its own trees, as
// ForestColl and Blink build them (topology/forest.h): for root B, shard B (part_offset(count, n,
// B)) is cut into pieces by the shares of B's trees; the all-gather sends each piece down its
// tree from B, the reduce-scatter reduces it up the reversed tree to B, and the all-reduce does
// both, slice by slice (up, then down as soon as the root has the slice; a window of
// kTreeWindowSlices per tree as in the double binary tree: build_tree_piece, tree_allreduce.cc).
// The trees come from AlgoOptions::forest (the planner's packing over the job's network,
// planned_forest); without them every root sends half its shard each way along the nodes' chain
// (topo::chain_forest), bandwidth-optimal on a ring or one switch.
//
// Determinism: every slice is combined own OP child0 OP child1 ... (children ascending) on the
// way up and exists on its root only, which sends the final bits down: identical on every rank.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/slicing.h"
#include "collectives/algorithms/tree.h"
#include "collectives/planner.h"
#include "topology/forest.h"

namespace weft {
namespace {

std::vector<topo::WeightedTree> forest_of(const AlgoOptions& opt, int n) {
  if (opt.forest.empty()) return topo::chain_forest(node_order(opt, n));
  topo::check_forest(opt.forest, n);
  return opt.forest;
}

// Element ranges of root B's trees inside its shard [first, first + len): by the shares, in the
// forest's order, the last tree taking what rounding leaves.
struct Piece {
  const topo::Tree* tree;
  uint64_t first, count;
};
std::vector<std::vector<Piece>> pieces_by_root(const std::vector<topo::WeightedTree>& forest, int n,
                                               uint64_t (*first)(uint64_t, int, int), uint64_t total) {
  std::vector<std::vector<const topo::WeightedTree*>> of(n);
  for (const auto& t : forest) of[t.tree.root].push_back(&t);
  std::vector<std::vector<Piece>> out(n);
  for (int B = 0; B < n; ++B) {
    const uint64_t start = first(total, n, B), len = first(total, n, B + 1) - start;
    double sum = 0;
    for (const auto* t : of[B]) sum += t->share;
    double cum = 0;
    uint64_t at = 0;
    for (size_t i = 0; i < of[B].size(); ++i) {
      cum += of[B][i]->share;
      const uint64_t end = i + 1 == of[B].size() ? len : std::min<uint64_t>(len, static_cast<uint64_t>(std::floor(cum / sum * len)));
      out[B].push_back({&of[B][i]->tree, start + at, std::max(end, at) - at});
      at = std::max(end, at);
    }
  }
  return out;
}

uint64_t shard_first(uint64_t total, int n, int B) { return part_offset(total, n, B); }
uint64_t block_first(uint64_t total, int n, int B) { return total * B / n; }  // whole blocks (total = n x count)

}  // namespace

void build_forest_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks();
  const uint64_t es = dtype_size(a.dtype);
  if (trivial_allreduce(b, a)) return;
  const auto forest = forest_of(opt, n);
  const Buf own = a.in_place ? Buf::kRecv : Buf::kSend;
  uint64_t scratch = 0;
  for (const auto& pieces : pieces_by_root(forest, n, shard_first, a.count))
    for (const Piece& p : pieces)
      scratch = build_tree_piece(b, a, {p.tree, p.count, true, true, {own, p.first * es}, {Buf::kRecv, p.first * es}, true},
                                 opt.slice_bytes / topo::kTreeSliceDivisor, scratch);
  b.need_scratch(scratch);
}

void build_forest_reducescatter(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks();
  const uint64_t es = dtype_size(a.dtype);
  if (a.count == 0) return;
  if (n == 1) {
    b.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, a.count * es);
    return;
  }
  const auto forest = forest_of(opt, n);
  uint64_t scratch = 0;
  const auto all = pieces_by_root(forest, n, block_first, a.count * n);
  for (int B = 0; B < n; ++B)
    for (const Piece& p : all[B]) {
      // Element p.first of the whole vector: block B, element p.first - B * count of it; the
      // result (on B only) at that element of the receive buffer.
      const uint64_t in_block = p.first - static_cast<uint64_t>(B) * a.count;
      scratch = build_tree_piece(b, a, {p.tree, p.count, true, false, {Buf::kSend, p.first * es}, {Buf::kRecv, in_block * es}, false},
                                 opt.slice_bytes / topo::kTreeSliceDivisor, scratch);
    }
  b.need_scratch(scratch);
}

void build_forest_allgather(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks(), r = b.rank();
  const uint64_t es = dtype_size(a.dtype);
  if (a.count == 0) return;
  if (!a.in_place) b.copy({Buf::kRecv, static_cast<uint64_t>(r) * a.count * es}, {Buf::kSend, 0}, a.count * es);
  if (n == 1) return;
  const auto forest = forest_of(opt, n);
  const auto all = pieces_by_root(forest, n, block_first, a.count * n);
  for (int B = 0; B < n; ++B)
    for (const Piece& p : all[B]) {
      // The root sends its own block straight from the send buffer (or, in place, from where it is).
      const uint64_t in_block = p.first - static_cast<uint64_t>(B) * a.count;
      const Ref own = B == r && !a.in_place ? Ref{Buf::kSend, in_block * es} : Ref{Buf::kRecv, p.first * es};
      build_tree_piece(b, a, {p.tree, p.count, false, true, own, {Buf::kRecv, p.first * es}, true},
                       opt.slice_bytes / topo::kTreeSliceDivisor, 0);
    }
}

}  // namespace weft

// ---- Prediction ------------------------------------------------------------------------------
// The planner's packing over the job's network (topo::packed_trees, up to kForestExactRanks
// ranks): every tree's edges carry its share of S / p each way it is used, all at once, over the
// graph's links; plus a slice's trip up and down the deepest tree and the latency of its hops.
// Above kForestExactRanks, no packing: the cut bound itself (what a packing could reach).
namespace weft {

bool forest_eligible(const CallShape& s) { return s.nranks <= topo::kForestExactRanks; }

bool predict_forest(const PlanInput& in, Prediction& out) {
  using namespace topo;
  if (!in.net) return false;
  const NetGraph& g = *in.net;
  const int p = in.view.size();
  const bool allreduce = in.coll == CollectiveKind::kAllReduce;
  if (!allreduce && in.coll != CollectiveKind::kReduceScatter && in.coll != CollectiveKind::kAllGather) return false;
  const bool up = in.coll != CollectiveKind::kAllGather, down = in.coll != CollectiveKind::kReduceScatter;
  const double shard = in.bytes / std::max(1, p);
  if (p <= 1) return true;
  if (p > kForestExactRanks) {
    const CutBound cb = allgather_cut_bound(g);
    out.xfer_us = (allreduce ? 2 : 1) * cb.us_per_byte * shard;
    const double depth = std::ceil(std::log2(p));
    out.lat_us = (allreduce ? 2 : 1) * depth * in.model.net.alpha_us;
    out.steps = (allreduce ? 2 : 1) * depth;
    out.b = {cb.gbs_leaving, in.model.net.alpha_us};
    out.reasons = {fmt::format("{} ranks: more than the {} trees are packed for; the cut bound (cuts around ranks and "
                               "nodes) as if a packing reached it, with trees of depth log2(p)",
                               p, kForestExactRanks)};
    return true;
  }
  const Packing& pk = packed_trees(g);
  // Up and down at once (the all-reduce's slices overlap their phases), every link's bytes.
  int busiest = -1;
  std::vector<Flow> flows;
  int depth = 0, trees = 0;
  double path_alpha = 0;
  const double slice = std::min(shard, in.slice_bytes / kTreeSliceDivisor);
  // The connections (pairs of ranks) over each link, for the pipeline's fill below.
  std::set<std::pair<int, int>> pairs;
  for (const WeightedTree& t : pk.trees)
    for (int v = 0; t.share > 0 && v < p; ++v)
      if (const int par = t.tree.parent[v]; par >= 0) {
        if (up) pairs.insert({v, par});
        if (down) pairs.insert({par, v});
      }
  std::vector<int> on_link(g.edges().size(), 0), route;
  for (const auto& [a, c] : pairs) {
    route.clear();
    g.route(a, c, route);
    for (int e : route) ++on_link[e];
  }
  // One slice of `bytes` from a to c while the other connections on its busiest link move theirs:
  // half of them on average (all of them over-predicts the event level by up to 1.5x at 64
  // GPUs, 8 H100 per node; none, the hop alone, misses by up to 1.3x on rail-optimised leaves).
  auto loaded_hop_us = [&](int a, int c, double bytes) {
    route.clear();
    g.route(a, c, route);
    int n = 1;
    double gbs = std::numeric_limits<double>::infinity();  // the route's slowest link
    for (int e : route) n = std::max(n, on_link[e]), gbs = std::min(gbs, g.edges()[e].gbs);
    return route.empty() ? 0.0 : std::max(1.0, n / 2.0) * transfer_us(bytes, gbs);
  };
  double trip_us = 0;  // the longest trip of a tree's slice (of its own size) up and down its deepest path
  for (const WeightedTree& t : pk.trees) {
    if (t.share <= 0) continue;
    ++trees;
    depth = std::max(depth, t.tree.depth());
    const double kt = std::max(1.0, std::ceil(t.share * shard / std::max(1.0, slice))), st = t.share * shard / kt;
    for (int v = 0; v < p; ++v) {
      const int par = t.tree.parent[v];
      if (par < 0) continue;
      if (down) flows.push_back({par, v, t.share * shard});
      if (up) flows.push_back({v, par, t.share * shard});
      double us = 0, alpha = 0;
      for (int u = v; t.tree.parent[u] >= 0; u = t.tree.parent[u]) {
        const int w = t.tree.parent[u];
        us += (up ? loaded_hop_us(u, w, st) : 0) + (down ? loaded_hop_us(w, u, st) : 0);
        alpha += g.alpha_us(u, w);
      }
      trip_us = std::max(trip_us, us), path_alpha = std::max(path_alpha, alpha);
    }
  }
  const double busiest_us = flows_time_us(g, flows, &busiest);
  // The connections sharing the links (topology/forest.h): no faster than the busiest link's bytes,
  // slower where a link's connections are held back at their other end. Scales with the shard
  // (computed once per packing).
  const double shared = (up && down ? pk.shared_both_us_per_byte : pk.shared_us_per_byte) * shard;
  const double stage = std::max(busiest_us, shared);
  // Latency: a slice's way along the deepest path. The messages a rank starts for its many trees
  // (one up per tree it is not the root of, one per child down) go to different peers at once
  // and their latencies overlap, as the event level plays them; until 6 Dec they were added one
  // after the other (m x alpha), which at 64 GPUs (8 H100 per node) made the prediction 2x the
  // event level at 256 MiB and 130x at 1 MiB. Where ranks share cores, the planner's CPU term
  // still charges every message in sequence (out.steps).
  std::vector<int> ups(p, 0), downs(p, 0);
  for (const WeightedTree& t : pk.trees)
    for (int v = 0; t.share > 0 && v < p; ++v)
      if (const int par = t.tree.parent[v]; par >= 0) ++ups[v], ++downs[par];
  const int m_up = *std::max_element(ups.begin(), ups.end()), m_down = *std::max_element(downs.begin(), downs.end());
  // A pipeline of k slices: k - 1 at the links' pace plus one slice's trip up and down the
  // deepest path, each hop shared with the other connections on its link (7 Dec; until then each
  // hop alone, and the event level was 1.23x the closed form at 32 GPUs and 64 MiB, 1.28x at 64
  // GPUs on rail-optimised leaves; docs/PERFORMANCE.md, "Packed trees at scale").
  const double k = std::max(1.0, std::ceil(shard / std::max(1.0, slice)));
  out.xfer_us = std::max(stage, (k - 1) / k * stage + trip_us);
  out.lat_us = (up ? path_alpha : 0) + (down ? path_alpha : 0);
  out.steps = (up ? std::max(depth, m_up) : 0) + (down ? std::max(depth, m_down) : 0);
  out.b = {busiest >= 0 ? g.edges()[busiest].gbs : 0.0, path_alpha / std::max(1, depth)};
  const double ideal = (up && down ? 2 : 1) * pk.bound.us_per_byte * shard;
  out.reasons = {
      fmt::format("{} spanning trees over {} ranks ({:.1f} per root, depth up to {}), packed over the network's links", trees,
                  p, static_cast<double>(trees) / p, depth),
      fmt::format("the busiest link ({} -> {}) carries {:.0f} us of bytes, {:.2f}x the cut bound's {:.0f} us{}",
                  busiest >= 0 ? g.vertex_name(g.edges()[busiest].from) : "-",
                  busiest >= 0 ? g.vertex_name(g.edges()[busiest].to) : "-", busiest_us,
                  ideal > 0 ? busiest_us / ideal : 0.0, ideal,
                  shared > busiest_us * 1.0001
                      ? fmt::format("; the connections, sharing the links, take {:.0f} us ({:.2f}x)", shared,
                                    ideal > 0 ? shared / ideal : 0.0)
                      : std::string())};
  return true;
}

}  // namespace weft
