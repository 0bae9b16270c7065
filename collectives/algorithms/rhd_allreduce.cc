// Recursive halving-doubling all-reduce (Rabenseifner): a reduce-scatter by recursive halving
// followed by an all-gather by recursive doubling, over the largest power of two p <= n.
//
// Non-powers of two: with rem = n - p, ranks 0..2*rem-1 pair up first (fold): the even rank of
// each pair sends its whole vector to the odd one, which combines them and takes part in the
// power-of-two algorithm as "new rank" r/2; ranks from 2*rem on are new rank r - rem. At the end
// the odd rank sends the finished vector back to its even partner (unfold).
//
// Halving: at distance m = 1, 2, 4, ..., p/2 a new rank keeps the lower half of its current block
// range when its bit m is clear (the upper half otherwise), sends the other half to partner
// (new rank ^ m) and combines the half it keeps: mine OP theirs. After log2 p steps new rank q
// owns one block of p (elements part_offset(count, p, block)); doubling retraces the steps in
// reverse, from distance p/2 down to 1.
//
// The distances grow (as in MPICH), and ranks take part by their position in node order
// (`node_order`: the nodes one after the other), not by their number: the first halving steps,
// which move the most data, pair ranks of the same node, and only the smaller halves of the later
// steps cross between nodes (2 nodes x 2 ranks: each node's link carries the vector once each way
// per phase instead of twice); the fold pairs neighbours.
//
// Determinism: each block's value is computed by exactly one rank in a fixed sequence of
// combinations and then only copied: every rank ends with the same bits, on every run.
#include <algorithm>
#include <cmath>

#include "collectives/algorithms/builtin.h"
#include "collectives/planner.h"
#include "collectives/algorithms/slicing.h"

namespace weft {

namespace {

// One rank's build: where it stands (its position r in node order, its new rank in the power of
// two), where its data is, and which steps last wrote or read each range.
struct Rhd {
  ScheduleBuilder& b;
  const CollectiveArgs& a;
  std::vector<int> order;
  uint64_t es, total, slice;
  int r, p, rem, newrank;
  // Where this rank's current data lives: the send buffer until it first combines.
  Buf cur;
  RangeWriters writers;        // the combinations that last wrote ranges of the receive buffer
  RangeWriters scratch_reads;  // the combinations that read ranges of the scratch buffer
  std::vector<StepId> reads;   // sends out of the receive buffer (write-after-read)
  int lo = 0, hi = 0;          // the blocks this rank owns
  std::vector<StepId> step_sends;  // the last halving step's sends

  Rhd(ScheduleBuilder& builder, const CollectiveArgs& args, const AlgoOptions& opt)
      : b(builder), a(args), order(node_order(opt, builder.nranks())), es(dtype_size(args.dtype)),
        total(args.count * es), slice(opt.slice_bytes), r(position_of(order, builder.rank())), p(1),
        cur(args.in_place ? Buf::kRecv : Buf::kSend) {
    const int n = b.nranks();
    while (p * 2 <= n) p *= 2;
    rem = n - p;
    newrank = r < 2 * rem ? (r % 2 ? r / 2 : -1) : r - rem;
    hi = p;
  }
  int real_rank(int q) const { return order[q < rem ? 2 * q + 1 : q + rem]; }
  SlicedRange sliced(uint64_t off, uint64_t bytes) const {
    return SlicedRange(off / es, bytes / es, es, slices_for(bytes / es, es, slice));
  }
  void range(int l, int h, uint64_t* off, uint64_t* bytes) const {
    *off = part_offset(a.count, p, l) * es;
    *bytes = part_offset(a.count, p, h) * es - *off;
  }
  bool fold();
  void halving();
  void doubling();
};

// The fold of ranks below 2 * rem; false on the even ones, which are done once they have handed
// their vector over (and posted the receive of the result).
bool Rhd::fold() {
  if (r >= 2 * rem) return true;
  b.need_scratch(total);  // the folded-in vector (then each halving step's half)
  const SlicedRange all = sliced(0, total);
  if (newrank < 0) {  // even: hand everything to r+1, get the result back at the end
    std::vector<StepId> sent;
    for (uint64_t j = 0; j < all.slices; ++j) sent.push_back(b.send(order[r + 1], {cur, all.off(j)}, all.bytes(j)));
    StepId rv = b.recv(order[r + 1], {Buf::kRecv, 0}, total);
    for (StepId x : sent) b.add_dep(rv, x);
    return false;
  }
  // The fold, slice by slice: each slice is combined as it arrives.
  for (uint64_t j = 0; j < all.slices; ++j) {
    const uint64_t off = all.off(j), bytes = all.bytes(j);
    StepId rv = b.recv(order[r - 1], {Buf::kScratch, off}, bytes);
    StepId c = b.reduce3({Buf::kRecv, off}, {cur, off}, {Buf::kScratch, off}, bytes, {rv});
    writers.add(off, bytes, c);
    scratch_reads.add(off, bytes, c);
  }
  cur = Buf::kRecv;
  return true;
}

// Halving, each step's halves cut into slices (the partner cuts the same range the same way):
// a slice is combined as soon as it arrives, so the reductions run under the transfers. A
// step's sends wait for all of the previous step's combinations: letting the steps overlap
// (each slice sent on as soon as it is combined) keeps two connections per NIC busy at once,
// which ran slower over TCP (docs/PERFORMANCE.md, "Emulated cluster").
// Clear to send: where n is not a power of two and the vector is more than one slice, a halving
// step after the first sends only once its partner says (a message of no bytes) that it has
// combined its previous step. Without it the ranks whose previous step stayed inside their node
// (or who skipped the fold) send the next one while their partner still receives the previous
// one over its NIC, and the two steps share that link: 3 nodes x 2 ranks, 16 MiB, the first
// step between nodes took 107 ms instead of 70.5 in the event level (docs/PERFORMANCE.md,
// "Both levels beside the emulated cluster"). Small vectors skip it: a message's latency
// would cost more than the overlap.
void Rhd::halving() {
  const bool clear_to_send = rem > 0 && total > slice;
  uint64_t scratch_base = 0;  // each step receives into its own part of the scratch buffer
  for (int m = 1; m < p; m *= 2) {
    step_sends.clear();
    const int partner = real_rank(newrank ^ m), mid = (lo + hi) / 2;
    const bool lower = (newrank & m) == 0;
    uint64_t soff, sbytes, koff, kbytes;
    range(lower ? mid : lo, lower ? hi : mid, &soff, &sbytes);
    range(lower ? lo : mid, lower ? mid : hi, &koff, &kbytes);
    const SlicedRange sr = sliced(soff, sbytes), kr = sliced(koff, kbytes);
    uint64_t aoff, abytes;  // this step's whole range: its sends wait for all of the last step
    range(lo, hi, &aoff, &abytes);
    StepId cleared = kNoStep;
    if (clear_to_send && m > 1) {
      const StepId ready = b.send(partner, {Buf::kRecv, 0}, 0);
      writers.gate(b, ready, aoff, abytes);  // after this rank's previous step is combined
      cleared = b.recv(partner, {Buf::kRecv, 0}, 0);
    }
    for (uint64_t j = 0; sbytes && j < sr.slices; ++j) {
      StepId s = b.send(partner, {cur, sr.off(j)}, sr.bytes(j));
      if (cleared != kNoStep) b.add_dep(s, cleared);
      step_sends.push_back(s);
      if (cur == Buf::kRecv) {
        writers.gate(b, s, aoff, abytes);
        reads.push_back(s);
      }
    }
    RangeWriters kept;
    for (uint64_t j = 0; kbytes && j < kr.slices; ++j) {
      const uint64_t off = kr.off(j), bytes = kr.bytes(j), sc = scratch_base + (off - koff);
      StepId rv = b.recv(partner, {Buf::kScratch, sc}, bytes);
      scratch_reads.gate(b, rv, sc, bytes);
      StepId c = b.reduce3({Buf::kRecv, off}, {cur, off}, {Buf::kScratch, sc}, bytes, {rv});
      if (cur == Buf::kRecv) writers.gate(b, c, off, bytes);
      kept.add(off, bytes, c);
    }
    scratch_base += kbytes;  // the kept halves' sum: below total unless blocks are uneven
    writers = kept;  // later steps read and write only inside the kept half
    // Out of place, the first step leaves the half it sent in the send buffer; later steps only
    // read the half they combined, which is in the receive buffer now.
    cur = Buf::kRecv;
    if (lower) hi = mid;
    else lo = mid;
  }
  b.need_scratch(scratch_base);
}

// Doubling: exchange the owned range with the partner of each halving step, in reverse; then the
// unfold (the result back to the even partner).
void Rhd::doubling() {
  uint64_t off, bytes;
  range(lo, hi, &off, &bytes);
  StepId last = kNoStep;  // the owned range is final after `writers` (and the average)
  if (a.op == RedOp::kAvg && bytes) {
    last = b.avg({Buf::kRecv, off}, bytes);
    writers.gate(b, last, off, bytes);
  }
  for (int m = p / 2; m >= 1; m /= 2) {
    const int partner = real_rank(newrank ^ m);
    const bool lower = (newrank & m) == 0;
    const int width = hi - lo;
    const int plo = lower ? hi : lo - width, phi = lower ? hi + width : lo;
    uint64_t poff, pbytes;
    range(plo, phi, &poff, &pbytes);
    StepId s = bytes ? b.send(partner, {Buf::kRecv, off}, bytes, {last}) : kNoStep;
    if (s != kNoStep) writers.gate(b, s, off, bytes);  // the owned range's combinations
    // The first doubling send also waits for the last halving step's sends: the owned block
    // is often final before the rest of that step has crossed (its slices came first), and
    // sending it then puts two steps on one NIC at once, slowing the step still on the
    // critical path (3 nodes x 2 ranks, 64 MiB: 1.45-1.48 -> 1.28-1.31 s).
    if (s != kNoStep && m == p / 2)
      for (StepId x : step_sends) b.add_dep(s, x);
    if (pbytes) {
      StepId rv = b.recv(partner, {Buf::kRecv, poff}, pbytes, {last});
      for (StepId x : reads) b.add_dep(rv, x);
      last = rv;
    }
    if (s != kNoStep) reads.push_back(s);
    lo = std::min(lo, plo);
    hi = std::max(hi, phi);
    range(lo, hi, &off, &bytes);
  }
  if (r < 2 * rem) {
    StepId u = b.send(order[r - 1], {Buf::kRecv, 0}, total, {last});
    writers.gate(b, u, 0, total);
  }
}

}  // namespace

void build_rhd_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  if (a.count == 0) return;
  if (b.nranks() == 1) {
    if (!a.in_place) b.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, a.count * dtype_size(a.dtype));
    return;
  }
  Rhd rhd(b, a, opt);
  if (!rhd.fold()) return;
  rhd.halving();
  rhd.doubling();
}

}  // namespace weft

// ---- Prediction ------------------------------------------------------------------------------
// Recursive halving-doubling over the ranks in node order (topo::rhd_stages follows build_rhd_
// allreduce above): stages one after the other, each as slow as its busiest NIC or rank.
namespace weft {

bool predict_rhd(const PlanInput& in, Prediction& out) {
  using namespace topo;
  const auto stages = rhd_stages(in.view, in.bytes, in.coll != CollectiveKind::kAllGather,
                                 in.coll != CollectiveKind::kReduceScatter);
  const double S = in.bytes;
  const int p = in.view.size();
  double xfer = 0, lat = 0, busiest = 0;
  Bottleneck b;
  for (const auto& st : stages) {
    StageCost c = stage_cost(in.view, in.model, st, in.net);
    xfer += c.us;
    lat += c.b.alpha;
    busiest += c.nic_bytes;
    if (c.b.gbs > 0) b.add({c.b.alpha, c.b.gbs});
  }
  if (b.gbs <= 0) b.add(in.model.edge(Path{PathClass::kSelf, Fabric::kNone, 0, 0}));
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  const int extra = p - p2;
  out.xfer_us = xfer;
  out.lat_us = lat;
  out.b = b;
  out.reasons = {
      fmt::format("{} stages over {} ranks in node order{}; distances 1, 2, 4, ...: the largest halves stay inside nodes",
                  stages.size(), p2, extra > 0 ? fmt::format(" plus a fold-in of {} extra ranks", extra) : std::string()),
      fmt::format("the busiest NIC of each stage carries {:.2f}x the buffer in all", S > 0 ? busiest / S : 0.0)};
  out.steps = static_cast<double>(stages.size());
  return true;
}

}  // namespace weft
