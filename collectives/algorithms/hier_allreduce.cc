// Hierarchical all-reduce, one schedule over the world: (1) a ring reduce-scatter among the ranks
// of each node, after which local rank i holds the node's sum of shard (i+1) mod L; (2) a ring
// all-reduce of that shard among the ranks with the same local index on every node (a rail), all
// rails at once; (3) a ring all-gather among the ranks of each node. Only the rails cross nodes,
// and each carries 1/L of the buffer: a node's link carries 2(N-1)/N of the buffer in all, where a
// flat ring over nodes of L ranks pushes 2(n-1)/n of it through each crossing edge.
//
// Every phase is pipelined in slices like the ring, and the phases overlap: a step of one phase
// waits only for the steps of the previous phase that wrote the bytes it reads or overwrites
// (byte-range dependencies), so the inter-node link starts carrying data as soon as the first
// slices of the intra-node reduce-scatter are final, and the intra-node all-gather of a slice
// starts as soon as the rail delivered it. With coarse gates between phases instead, the slow
// link idled during the intra-node phases (measured: 2x2 nodes, 1 Gbit/s links, 64 MiB).
//
// Needs opt.node_of_rank with the same number of ranks on every node; otherwise (no layout, one
// node, one rank per node or uneven nodes) it builds the flat ring, which is what hier degenerates
// to anyway for one rank per node. Deterministic: the order of every combination is fixed by the
// layout, and each shard's final value is produced once and copied everywhere.
#include <map>
#include <set>

#include "collectives/algorithms/builtin.h"
#include "collectives/planner.h"
#include "collectives/algorithms/ring.h"
#include <fmt/format.h>

#include "collectives/algorithms/slicing.h"

namespace weft {
namespace {

// A ring over `ranks` (global ranks in ring order) on which this rank stands at `pos`, over
// elements [first, first+count) cut into ranks.size() chunks of equally many slices.
struct GroupRing {
  std::vector<int> ranks;
  int pos = 0;
  uint64_t first = 0, count = 0, es = 1, slices = 1;
  int size() const { return static_cast<int>(ranks.size()); }
  int next() const { return ranks[mod(pos + 1, size())]; }
  int prev() const { return ranks[mod(pos - 1, size())]; }
  uint64_t chunk_el(uint64_t c) const { return part_offset(count, ranks.size(), c); }
  SlicedRange chunk(int c) const {
    c = mod(c, size());
    return SlicedRange(first + chunk_el(c), chunk_el(c + 1) - chunk_el(c), es, slices);
  }
};

GroupRing make_ring(std::vector<int> ranks, int me, uint64_t first, uint64_t count, uint64_t es, uint64_t slice_bytes) {
  GroupRing g;
  g.pos = static_cast<int>(std::find(ranks.begin(), ranks.end(), me) - ranks.begin());
  g.ranks = std::move(ranks);
  g.first = first;
  g.count = count;
  g.es = es;
  g.slices = slices_for(g.chunk_el(1) - g.chunk_el(0), es, slice_bytes);
  return g;
}

struct RsResult {
  std::vector<std::vector<StepId>> sends;  // [step][slice]: for the all-gather's write-after-read
  RangeWriters writes;                     // the steps that made the owned chunk (chunk pos+1) final
};

// Ring reduce-scatter over g; afterwards position p owns chunk p+1 in the receive buffer. The
// first sends read the send buffer when `from_send`; incoming data is reduced with the send
// buffer (`from_send`, landing directly in the receive buffer) or received into scratch slots and
// reduced into the receive buffer. `gate`: the writers that a read or write of the receive buffer
// waits for (null: none). `avg`: divide the final sums (kAvg). `order`: the slices in the order
// each step posts them (null: 0, 1, ...); every rank of the ring must use the same.
RsResult ring_reduce_scatter(ScheduleBuilder& b, const GroupRing& g, bool from_send, SlotRing* slots,
                             RangeWriters* gate, bool avg, const std::vector<uint64_t>* order = nullptr) {
  const int n = g.size(), r = g.pos;
  RsResult res;
  res.sends.assign(n - 1, std::vector<StepId>(g.slices, kNoStep));
  std::vector<StepId> ready(g.slices, kNoStep);
  for (int s = 0; s < n - 1; ++s) {
    SlicedRange out = g.chunk(r - s), in = g.chunk(r - s - 1);
    std::vector<StepId> produced(g.slices, kNoStep);
    for (uint64_t jj = 0; jj < g.slices; ++jj) {
      const uint64_t j = order ? (*order)[jj] : jj;
      if (out.bytes(j)) {
        Ref src{s == 0 && from_send ? Buf::kSend : Buf::kRecv, out.off(j)};
        res.sends[s][j] = b.send(g.next(), src, out.bytes(j), {ready[j]});
        if (s == 0 && !from_send && gate) gate->gate(b, res.sends[s][j], out.off(j), out.bytes(j));
      }
      const uint64_t off = in.off(j), bytes = in.bytes(j);
      if (!bytes) continue;
      if (from_send) {
        StepId rv = b.recv(g.prev(), {Buf::kRecv, off}, bytes);
        produced[j] = b.reduce({Buf::kRecv, off}, {Buf::kSend, off}, bytes, {rv});
      } else {
        auto slot = slots->take();
        StepId rv = b.recv(g.prev(), slot.ref, bytes, {slot.last_user});
        produced[j] = b.reduce({Buf::kRecv, off}, slot.ref, bytes, {rv});
        if (gate) gate->gate(b, produced[j], off, bytes);
        slots->release(slot, produced[j]);
      }
      if (s == n - 2 && avg) produced[j] = b.avg({Buf::kRecv, off}, bytes, {produced[j]});
      if (s == n - 2) res.writes.add(off, bytes, produced[j]);
    }
    ready = produced;
  }
  return res;
}

// Ring all-gather over g of the chunks owned after ring_reduce_scatter (position p owns p+1):
// each slice of the owned chunk is first sent after its writers in `gate`; receives wait for the
// reduce-scatter's sends of the same bytes. Returns the receives (each one's range is final).
RangeWriters ring_all_gather(ScheduleBuilder& b, const GroupRing& g, const RsResult& rs, RangeWriters& gate) {
  const int n = g.size(), r = g.pos;
  std::vector<StepId> ready(g.slices, kNoStep);
  RangeWriters recvs;
  for (int s = 0; s < n - 1; ++s) {
    SlicedRange out = g.chunk(r + 1 - s), in = g.chunk(r - s);
    std::vector<StepId> produced(g.slices, kNoStep);
    for (uint64_t j = 0; j < g.slices; ++j) {
      if (out.bytes(j)) {
        StepId sd = b.send(g.next(), {Buf::kRecv, out.off(j)}, out.bytes(j), {ready[j]});
        if (s == 0) gate.gate(b, sd, out.off(j), out.bytes(j));
      }
      if (in.bytes(j)) {
        produced[j] = b.recv(g.prev(), {Buf::kRecv, in.off(j)}, in.bytes(j), {rs.sends[s][j]});
        recvs.add(in.off(j), in.bytes(j), produced[j]);
      }
    }
    ready = produced;
  }
  return recvs;
}

}  // namespace

NodeLayout node_layout(const std::vector<int>& node_of_rank, int nranks) {
  NodeLayout l;
  if (static_cast<int>(node_of_rank.size()) != nranks) {
    l.why = fmt::format("{} node ids for {} ranks", node_of_rank.size(), nranks);
    return l;
  }
  std::map<int, std::vector<int>> nodes;
  for (int r = 0; r < nranks; ++r) {
    if (node_of_rank[r] < 0) {
      l.why = fmt::format("rank {} has no node", r);
      return l;
    }
    nodes[node_of_rank[r]].push_back(r);
  }
  for (auto& [id, ranks] : nodes) l.nodes.push_back(std::move(ranks));
  if (l.nodes.size() < 2) l.why = "the communicator spans one node";
  for (size_t k = 1; k < l.nodes.size() && l.why.empty(); ++k)
    if (l.nodes[k].size() != l.nodes[0].size())
      l.why = fmt::format("nodes have different numbers of ranks (node 0: {}, node {}: {})", l.nodes[0].size(), k,
                          l.nodes[k].size());
  return l;
}

// The layout hier uses: per node (in node-id order) its ranks in rank order, or empty when the
// layout does not suit (see above).
std::vector<std::vector<int>> hier_layout(const std::vector<int>& node_of_rank, int nranks) {
  NodeLayout l = node_layout(node_of_rank, nranks);
  if (!l.why.empty() || l.nodes.front().size() < 2) return {};
  return std::move(l.nodes);
}

HierPosition hier_position(const std::vector<int>& node_of_rank, int nranks, int rank) {
  HierPosition h;
  h.nodes = hier_layout(node_of_rank, nranks);
  for (int k = 0; k < h.num_nodes(); ++k) {
    auto it = std::find(h.nodes[k].begin(), h.nodes[k].end(), rank);
    if (it != h.nodes[k].end()) h.node = k, h.local = static_cast<int>(it - h.nodes[k].begin());
  }
  return h;
}

void build_hier_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  auto nodes = hier_layout(opt.node_of_rank, b.nranks());
  if (nodes.empty() || a.count == 0) return build_ring_allreduce(b, a, opt);
  const uint64_t es = dtype_size(a.dtype);
  const int me = b.rank();
  const std::vector<int>* local = nullptr;
  for (auto& ranks : nodes)
    if (std::find(ranks.begin(), ranks.end(), me) != ranks.end()) local = &ranks;
  const int L = static_cast<int>(local->size());
  const int li = static_cast<int>(std::find(local->begin(), local->end(), me) - local->begin());

  const int N = static_cast<int>(nodes.size());
  int k = 0;  // this node's position on every rail
  while (&nodes[k] != local) ++k;
  GroupRing intra = make_ring(*local, me, 0, a.count, es, opt.slice_bytes);
  std::vector<int> rail;
  for (auto& ranks : nodes) rail.push_back(ranks[li]);
  const uint64_t sfirst = intra.chunk_el(mod(li + 1, L)), scount = intra.chunk_el(mod(li + 1, L) + 1) - sfirst;
  GroupRing inter = make_ring(rail, me, sfirst, scount, es, opt.slice_bytes);

  // (1) Intra-node reduce-scatter; local index li owns shard li+1. Its last step makes the
  // shard's slices final one after another, and position k on a rail first sends the rail's
  // chunk k, then reduces chunks k-1, k-2, ...: so the node's ring posts its slices in that
  // order (by the rail chunk each starts in), and every rail starts with its first slice instead
  // of waiting up to the whole node phase for its chunk (64 nodes: the rails' start spread over
  // the node's reduce-scatter, the last starting after all of it, in the event simulation).
  // The order is computed on shard 0's geometry (shards differ by at most an element), so that
  // the node's ranks, which exchange these slices, agree on it.
  std::vector<uint64_t> order(intra.slices);
  {
    const SlicedRange shard = intra.chunk(0);
    std::vector<int> key(intra.slices);
    for (uint64_t j = 0; j < intra.slices; ++j) {
      const uint64_t el = shard.off(j) / es - shard.first_el;
      int c = 0;
      while (c + 1 < N && part_offset(shard.count, N, c + 1) <= el) ++c;
      key[j] = mod(k - c, N);
      order[j] = j;
    }
    std::stable_sort(order.begin(), order.end(), [&](uint64_t x, uint64_t y) { return key[x] < key[y]; });
  }
  SlotRing slots1(0, intra.chunk(0).max_bytes(), 4);
  RsResult rs = ring_reduce_scatter(b, intra, !a.in_place, &slots1, nullptr, false, &order);
  const uint64_t scratch1 = a.in_place ? slots1.end() : 0;

  // (2) All-reduce of the owned shard along the rail (local index li of every node), in the
  // receive buffer with scratch slots; each slice starts once (1) made its bytes final.
  SlotRing slots2(scratch1, inter.chunk(0).max_bytes(), 4);
  RsResult rs2 = ring_reduce_scatter(b, inter, false, &slots2, &rs.writes, a.op == RedOp::kAvg);
  RangeWriters final2 = ring_all_gather(b, inter, rs2, rs2.writes);
  final2.merge(rs2.writes);  // every byte of the shard, with the step that made it final

  // (3) Intra-node all-gather of the shards, slice by slice as (2) finishes them.
  ring_all_gather(b, intra, rs, final2);
  b.need_scratch(slots2.end());
}

}  // namespace weft

// ---- Prediction ------------------------------------------------------------------------------
// Hierarchical (this file and hier_gather_scatter.cc): intra reduce-scatter, inter all-reduce
// per rail, intra all-gather; the phases overlap slice by slice, so the slowest phase sets the
// pace and each of the others adds one slice (pipeline fill and drain).
namespace weft {

bool predict_hier(const PlanInput& in, Prediction& out) {
  using namespace topo;
  const ClusterView& view = in.view;
  const int p = view.size(), N = view.num_nodes(), R = view.max_ranks_per_node();
  if (!(N > 1 && R > 1)) return false;
  const bool allreduce = in.coll == CollectiveKind::kAllReduce;
  const bool rooted = in.coll == CollectiveKind::kBroadcast || in.coll == CollectiveKind::kReduce;
  const double S = in.bytes, kSlice = in.slice_bytes;
  Bottleneck bi, br;
  for (int n = 0; n < N; ++n) {
    Bottleneck x = ring_bottleneck(view, in.model, in.base.levels[0].groups[n], false);
    bi.add({x.alpha, x.gbs});
  }
  for (const auto& rail : in.base.rails) {
    Bottleneck x = ring_bottleneck(view, in.model, rail.ranks, true);
    if (x.gbs > 0) br.add({x.alpha, x.gbs});
  }
  if (in.net && in.model.fabric.active()) {
    // Leaves or a mesh: every rail's ring hops at once over the graph.
    std::vector<Flow> hops;
    for (const auto& rail : in.base.rails)
      for (size_t i = 0; rail.ranks.size() > 1 && i < rail.ranks.size(); ++i)
        hops.push_back({rail.ranks[i], rail.ranks[(i + 1) % rail.ranks.size()], 1e6});
    br = graph_bottleneck(*in.net, hops);
  }
  const double chunk = S / R;
  auto overlapped = [](const std::vector<double>& phase, const std::vector<double>& slice) {
    const size_t slowest = static_cast<size_t>(std::max_element(phase.begin(), phase.end()) - phase.begin());
    double t = phase[slowest];
    for (size_t i = 0; i < phase.size(); ++i)
      if (i != slowest) t += std::min(slice[i], phase[i]);
    return t;
  };
  double xfer, lat;
  if (allreduce) {
    // Each phase is a ring pipelined in slices (see predict_ring): n steps of its chunk follow
    // each other at the slower of the chunk's transfer and one slice's hop (latency + transfer),
    // so with several slices per chunk the latencies hide under the bytes. The node's
    // reduce-scatter and all-gather run at once (slice by slice) over the same links inside the
    // node: one phase of twice the steps against the rails.
    auto ring_us = [&](double n, double chunk_bytes, const Bottleneck& x, bool bytes_only) {
      if (n <= 0) return 0.0;
      const double k = std::max(1.0, std::ceil(chunk_bytes / std::max(1.0, kSlice)));
      const double c = transfer_us(chunk_bytes, x.gbs), hop = x.alpha + transfer_us(chunk_bytes / k, x.gbs);
      return bytes_only ? n * c : (n - 1) * std::max(c, hop) + x.alpha + c;
    };
    const double ni = 2.0 * (R - 1), nr = 2.0 * (N - 1), ci = S / R, cr = chunk / N;
    auto total = [&](bool bytes_only) {
      const double rails = ring_us(nr, cr, br, bytes_only);
      double t = overlapped({ring_us(ni, ci, bi, bytes_only), rails},
                            {2.0 * transfer_us(std::min(ci, kSlice), bi.gbs), transfer_us(std::min(cr, kSlice), br.gbs)});
      // The node's ring reduce-scatter finishes every slice of its shard in its last step only:
      // the rails start after (R-2)/R of the buffer has crossed the node's links (nothing on 2
      // ranks per node; with fast links inside the node, little). The node posts its slices in
      // the order its rail position needs them (build_hier_allreduce), so one slice of that step
      // is enough to start.
      return std::max(t, (R - 2.0) / R * transfer_us(S, bi.gbs) + rails + transfer_us(std::min(ci, kSlice), bi.gbs));
    };
    xfer = total(true);
    lat = std::max(0.0, total(false) - xfer);
  } else if (rooted) {
    xfer = (R - 1.0) / R * transfer_us(S, bi.gbs) + transfer_us(chunk, br.gbs);
    lat = (R - 1) * bi.alpha + (N - 1) * br.alpha;
  } else {
    // Reduce-scatter: blocks of each rail summed inside the node, then along the rail;
    // all-gather: the other way round. One rank's block is S / p.
    const double block = S / p;
    const double rails = (N - 1.0) / N * transfer_us(chunk, br.gbs);
    xfer = overlapped({(R - 1.0) / R * transfer_us(S, bi.gbs), rails},
                      {transfer_us(std::min(block, kSlice), bi.gbs), transfer_us(std::min(block, kSlice), br.gbs)});
    // Reduce-scatter: the rails start on the node sums, which the node's ring finishes in its
    // last step (as for the all-reduce); the all-gather forwards each slice as the rails deliver.
    if (in.coll == CollectiveKind::kReduceScatter)
      xfer = std::max(xfer, (R - 2.0) / R * transfer_us(S, bi.gbs) + rails + transfer_us(std::min(block, kSlice), bi.gbs));
    lat = (R - 1) * bi.alpha + (N - 1) * br.alpha;
  }
  Bottleneck b = bi;
  b.add({br.alpha, br.gbs});
  std::set<std::string> nics;
  for (const auto& rail : in.base.rails)
    if (!rail.nics.empty()) nics.insert(rail.nics.front());
  std::string nic_text = nics.size() >= in.base.rails.size()
                             ? std::string("each rail uses its own NIC (the nearest to its devices), so all NICs work in parallel")
                             : fmt::format("the {} rails share {} NIC{} per node, each getting its share of it",
                                           in.base.rails.size(), nics.size(), nics.size() == 1 ? "" : "s");
  out.xfer_us = xfer;
  out.lat_us = lat;
  out.b = b;
  out.reasons = {fmt::format("intra-node ring of {} ranks at {:.3g} GB/s, then {} rails across {} nodes at {:.3g} GB/s each on 1/{} of the data",
                             R, bi.gbs, in.base.rails.size(), N, br.gbs, R),
                 nic_text, "the phases overlap slice by slice: the slowest sets the time"};
  out.steps = (allreduce ? 2.0 : 1.0) * (R - 1 + N - 1);
  return true;
}

}  // namespace weft
