// Ring all-reduce: a reduce-scatter followed by an all-gather around a ring, the data cut into
// nranks chunks and every chunk into slices that pipeline: slice j of step s+1 is sent as soon as
// slice j of step s is reduced, so reduction and transfer overlap.
//
// Channels (opt.channels): the buffer is split into that many contiguous parts, each reduced by
// its own independent ring; with more than two ranks odd channels run the ring backwards
// (r -> r-1), so both directions of every link carry data. Every channel is a self-consistent
// schedule, emitted one after the other, so the k-th message a->b still matches the k-th receive.
//
// Determinism: chunk c of a channel is reduced in ring order starting at the rank after its owner
// and ends at its owner, which sends the final bytes to everyone: every rank holds
// bitwise-identical results, on every run.
#include "collectives/algorithms/ring.h"
#include "collectives/planner.h"
#include "collectives/algorithms/slicing.h"

namespace weft {
namespace {

// One ring over elements [first, first+count); ring position p is rank pos_to_rank(p). Scratch
// (in place only) from scratch_base; returns the end of the scratch it uses.
uint64_t build_ring_part(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt, uint64_t first,
                         uint64_t count, bool reverse, uint64_t scratch_base) {
  const int n = b.nranks();
  const uint64_t es = dtype_size(a.dtype);
  const std::vector<int> order = ring_order(opt, n);  // ring position -> rank: the planned ring
  auto pos_to_rank = [&](int p) { return order[reverse ? mod(-p, n) : mod(p, n)]; };
  const int me = position_of(order, b.rank());
  const int r = reverse ? mod(-me, n) : me;  // this rank's ring position
  const int next = pos_to_rank(r + 1), prev = pos_to_rank(r - 1);
  // Chunk c covers elements [chunk_el(c), chunk_el(c+1)) of the part; every chunk has the same
  // slice count.
  auto chunk_el = [&](uint64_t c) { return part_offset(count, n, c); };
  const uint64_t slices = slices_for(chunk_el(1) - chunk_el(0), es, opt.slice_bytes);
  auto chunk = [&](int c) { return SlicedRange(first + chunk_el(c), chunk_el(c + 1) - chunk_el(c), es, slices); };
  // In place, incoming partial sums land in scratch slots (reused round-robin); out of place they
  // land straight in the receive buffer and are reduced with the send buffer.
  SlotRing slots(scratch_base, chunk(0).max_bytes(), 4);

  // rs_send[s][j]: the send of step s, slice j (the all-gather's receive into the same bytes
  // must wait for it: write after read); ready[j]: the step that produced slice j of the chunk
  // about to be sent.
  std::vector<std::vector<StepId>> rs_send(n - 1, std::vector<StepId>(slices, kNoStep));
  std::vector<StepId> ready(slices, kNoStep);
  for (int s = 0; s < n - 1; ++s) {
    SlicedRange out = chunk(mod(r - s, n)), in = chunk(mod(r - s - 1, n));
    std::vector<StepId> produced(slices, kNoStep);
    for (uint64_t j = 0; j < slices; ++j) {
      if (out.bytes(j)) {
        Ref src{s == 0 && !a.in_place ? Buf::kSend : Buf::kRecv, out.off(j)};
        rs_send[s][j] = b.send(next, src, out.bytes(j), {ready[j]});
      }
      const uint64_t off = in.off(j), bytes = in.bytes(j);
      if (!bytes) continue;
      if (a.in_place) {
        auto slot = slots.take();
        StepId rv = b.recv(prev, slot.ref, bytes, {slot.last_user});
        produced[j] = b.reduce({Buf::kRecv, off}, slot.ref, bytes, {rv});
        slots.release(slot, produced[j]);
      } else {
        StepId rv = b.recv(prev, {Buf::kRecv, off}, bytes);
        produced[j] = b.reduce({Buf::kRecv, off}, {Buf::kSend, off}, bytes, {rv});
      }
      if (s == n - 2 && a.op == RedOp::kAvg) produced[j] = b.avg({Buf::kRecv, off}, bytes, {produced[j]});
    }
    ready = produced;
  }
  // All-gather: the owned chunk is r+1; forward what arrives.
  for (int s = 0; s < n - 1; ++s) {
    SlicedRange out = chunk(mod(r + 1 - s, n)), in = chunk(mod(r - s, n));
    std::vector<StepId> produced(slices, kNoStep);
    for (uint64_t j = 0; j < slices; ++j) {
      if (out.bytes(j)) b.send(next, {Buf::kRecv, out.off(j)}, out.bytes(j), {ready[j]});
      if (in.bytes(j)) produced[j] = b.recv(prev, {Buf::kRecv, in.off(j)}, in.bytes(j), {rs_send[s][j]});
    }
    ready = produced;
  }
  return a.in_place ? slots.end() : scratch_base;
}

}  // namespace

void build_ring_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks();
  if (trivial_allreduce(b, a)) return;
  const uint64_t channels = std::clamp<uint64_t>(static_cast<uint64_t>(std::max(opt.channels, 1)), 1,
                                                 std::max<uint64_t>(1, a.count / n));
  uint64_t scratch = 0;
  for (uint64_t c = 0; c < channels; ++c) {
    uint64_t first = part_offset(a.count, channels, c), count = part_offset(a.count, channels, c + 1) - first;
    scratch = build_ring_part(b, a, opt, first, count, n > 2 && (c % 2 == 1), scratch);
  }
  b.need_scratch(scratch);
}

}  // namespace weft

// ---- Prediction: the flat ring through every node's best intra-node ring (base.rings[0]) ------
// Serves the ring all-reduce, reduce-scatter and all-gather rows (and the model's rooted
// collectives, a ring of p - 1 hops).
namespace weft {

bool predict_ring(const PlanInput& in, Prediction& out) {
  topo::Bottleneck b = topo::ring_bottleneck(in.view, in.model, in.base.rings[0], false);
  if (in.net && in.model.fabric.active()) {
    // Leaves or a mesh: the ring's hops all at once over the graph (hops that share a link, or a
    // mesh route of several links, slow each other down).
    std::vector<topo::Flow> hops;
    const std::vector<int>& ring = in.base.rings[0];
    for (size_t i = 0; ring.size() > 1 && i < ring.size(); ++i) hops.push_back({ring[i], ring[(i + 1) % ring.size()], 1e6});
    b = topo::graph_bottleneck(*in.net, hops);
  }
  const double S = in.bytes;
  const int p = in.view.size();
  // The steps run as a pipeline (build_ring_part): rank r's step s+1 sends slice j of the chunk
  // that its step s received, so a link moves on to its next step once it has sent its chunk
  // (the bottleneck's chunk / bw) and its slice j of the step before has arrived from the
  // previous rank. Round the ring that is a cycle of p hops holding one step each, so in steady
  // state the steps follow each other at the slower of the bottleneck's chunk and the average
  // hop's slice (its latency and its transfer alone: a hop between nodes may be slow if the hops
  // inside them are fast). With one slice per chunk on a ring of equal hops that is n (alpha +
  // chunk / bw), latency and bytes added; with many slices, or a few slow hops among many fast
  // ones (8 GPUs per node over NICs), the latencies hide under the bottleneck's bytes, as the
  // event level plays it (it measured 0.78x this formula's additive form at 1024 GPUs).
  const std::vector<int>& ring = in.base.rings[0];
  const bool allreduce = in.coll == CollectiveKind::kAllReduce;
  const bool rooted = in.coll == CollectiveKind::kBroadcast || in.coll == CollectiveKind::kReduce;
  const double chunk = p > 0 ? S / p : 0;
  const double k = std::max(1.0, std::ceil(chunk / std::max(1.0, in.slice_bytes))), slice = chunk / k;
  const bool graph = in.net && in.model.fabric.active();
  double alpha = 0, hop = 0;
  for (size_t i = 0; ring.size() > 1 && i < ring.size(); ++i) {
    const int a = ring[i], z = ring[(i + 1) % ring.size()];
    if (graph) {
      const double al = in.net->alpha_us(a, z);
      alpha += al, hop += al + topo::flows_time_us(*in.net, {{a, z, slice}});
    } else {
      const topo::LinkCost e = topo::rank_edge(in.view, in.model, a, z, false);
      alpha += e.alpha_us, hop += e.alpha_us + topo::transfer_us(slice, e.gbs);
    }
  }
  const double hops = static_cast<double>(ring.size());
  alpha = ring.size() > 1 ? alpha / hops : b.alpha;
  hop = ring.size() > 1 ? hop / hops : alpha + topo::transfer_us(slice, b.gbs);
  if (rooted) {
    out.xfer_us = topo::transfer_us(S, b.gbs), out.lat_us = (p - 1) * alpha;
  } else {
    const double n = allreduce ? 2.0 * (p - 1) : p - 1.0;
    const double chunk_us = topo::transfer_us(chunk, b.gbs);
    const double total = n > 0 ? (n - 1) * std::max(chunk_us, hop) + alpha + chunk_us : 0;
    out.xfer_us = n * chunk_us;
    out.lat_us = std::max(0.0, total - out.xfer_us);
  }
  out.b = b;
  out.reasons = {fmt::format("flat ring over {} ranks; slowest hop {:.1f} GB/s, {:.1f} us per step on average (slowest {:.1f})",
                             p, b.gbs, alpha, b.alpha),
                 "intra-node order minimises SYS, then NODE/PHB, then PXB crossings (NVLink neighbours first)"};
  out.steps = allreduce ? 2.0 * (p - 1) : p - 1.0;
  return true;
}

}  // namespace weft
