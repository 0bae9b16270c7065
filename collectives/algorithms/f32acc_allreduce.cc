// The all-reduce that sums 16-bit values in float32 and rounds once (issue 46, "numerics on
// every path"): a direct reduce-scatter, in which every rank sends each other rank its piece of
// that rank's block, the owner sums the n pieces in rank order in float32 and rounds the sum once
// to the 16-bit type, then a direct all-gather of the rounded blocks. A ring rounds at every hop
// instead (n - 1 roundings: about sqrt(n) times the error of one in bfloat16).
//
// Three forms, by type:
// - float16 / bfloat16, sum or avg: the pieces travel in their own type (kWiden, kWidenAdd,
//   kNarrow steps; the average divides the float32 sum before its one rounding).
// - float32 with a wire type (AlgoOptions::wire: WEFT_WIRE_DTYPE, sum or avg, > 1 rank): the
//   input is first rounded to the wire type (half the bytes on the wire), summed as above, and
//   every rank widens the gathered 16-bit result back into its float32 buffer: every rank ends
//   with the same float32 values (each one a 16-bit value).
// - anything else (WEFT_ALGO=f32acc with int32, float64, min, ...): the same exchange reduced in
//   the call's own type, in rank order.
//
// The buffer is cut into chunks of about n slices (at most 64), each exchanged on its own, so
// that one chunk's sums overlap the next chunk's transfers. Scratch: the float32 (or own-type)
// accumulators of this rank's blocks, the n - 1 pieces received for them, and with a wire type
// the rounded input and the gathered result (16 bits per element each).
#include <algorithm>
#include <vector>

#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/slicing.h"
#include "collectives/convert_kernels.h"
#include "collectives/planner.h"

namespace weft {

namespace {

struct Layout {
  enum class Form { kHalf, kWire, kOwn } form = Form::kOwn;
  DataType wire = DataType::kBfloat16;
  uint64_t es = 4, ws = 4;  // bytes per element of the call's type and on the wire
  uint64_t acc = 0, in = 0, gather = 0, rx = 0;  // scratch offsets
};

Layout layout(const CollectiveArgs& a, const AlgoOptions& opt, int n) {
  Layout L;
  L.es = dtype_size(a.dtype);
  if (sums_in_f32(a.dtype, a.op)) {
    L.form = Layout::Form::kHalf;
    L.wire = a.dtype;
  } else if (a.dtype == DataType::kFloat32 && opt.wire && n > 1 && (a.op == RedOp::kSum || a.op == RedOp::kAvg)) {
    L.form = Layout::Form::kWire;
    L.wire = *opt.wire;
  }
  L.ws = L.form == Layout::Form::kOwn ? L.es : 2;
  return L;
}

}  // namespace

void build_f32acc_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks(), r = b.rank();
  const uint64_t E = a.count;
  if (E == 0) return;
  Layout L = layout(a, opt, n);
  b.set_wire(L.wire);
  const bool own = L.form == Layout::Form::kOwn, wire = L.form == Layout::Form::kWire;
  const uint64_t slice = std::max<uint64_t>(opt.slice_bytes, 1);
  const uint64_t K = std::clamp<uint64_t>((E * L.ws + n * slice - 1) / (n * slice), 1, std::min<uint64_t>(64, E));
  uint64_t mine_total = 0;  // this rank's elements over all chunks
  for (uint64_t c = 0; c < K; ++c) {
    const uint64_t len = part_offset(E, K, c + 1) - part_offset(E, K, c);
    mine_total += part_offset(len, n, r + 1) - part_offset(len, n, r);
  }
  const uint64_t acc_es = own ? L.es : 4;
  L.acc = 0;
  L.in = mine_total * acc_es;
  L.gather = L.in + (wire ? E * 2 : 0);
  L.rx = L.gather + (wire ? E * 2 : 0);
  b.need_scratch(L.rx + (n - 1) * mine_total * L.ws);
  const bool avg = a.op == RedOp::kAvg;
  uint64_t cursor = 0;  // this rank's elements in the chunks before
  for (uint64_t c = 0; c < K; ++c) {
    const uint64_t c0 = part_offset(E, K, c), len = part_offset(E, K, c + 1) - c0;
    auto lo = [&](int p) { return c0 + part_offset(len, n, p); };
    auto cnt = [&](int p) { return part_offset(len, n, p + 1) - part_offset(len, n, p); };
    // This rank's contribution to block p, and where block p's result lands, in wire units.
    auto contribution = [&](int p) { return wire ? Ref{Buf::kScratch, L.in + lo(p) * 2} : Ref{Buf::kSend, lo(p) * L.ws}; };
    auto result = [&](int p) { return wire ? Ref{Buf::kScratch, L.gather + lo(p) * 2} : Ref{Buf::kRecv, lo(p) * L.ws}; };
    const StepId rounded_in = wire ? b.narrow({Buf::kScratch, L.in + c0 * 2}, {Buf::kSend, c0 * 4}, len, false) : kNoStep;
    std::vector<StepId> sent(n, kNoStep), got(n, kNoStep);
    std::vector<Ref> piece(n);
    const uint64_t mine = cnt(r);
    for (int k = 1; k < n; ++k) {
      const int to = mod(r + k, n);
      if (cnt(to)) sent[to] = b.send(to, contribution(to), cnt(to) * L.ws, {rounded_in});
    }
    for (int k = 1; k < n; ++k) {
      const int from = mod(r - k, n);
      piece[from] = {Buf::kScratch, L.rx + ((from < r ? from : from - 1) * mine_total + cursor) * L.ws};
      if (mine) got[from] = b.recv(from, piece[from], mine * L.ws);
    }
    piece[r] = contribution(r);
    got[r] = rounded_in;
    StepId fin = kNoStep;
    if (mine) {
      // The n pieces of this rank's block in rank order: the same bits whichever rank owns it.
      const Ref acc{Buf::kScratch, L.acc + cursor * acc_es};
      StepId prev = own ? b.copy(acc, piece[0], mine * L.es, {got[0]}) : b.widen(acc, piece[0], mine, {got[0]});
      for (int q = 1; q < n; ++q)
        prev = own ? b.reduce(acc, piece[q], mine * L.es, {prev, got[q]}) : b.widen_add(acc, piece[q], mine, {prev, got[q]});
      if (own) {
        if (avg) prev = b.avg(acc, mine * L.es, {prev});
        fin = b.copy(result(r), acc, mine * L.es, {prev});
      } else {
        fin = b.narrow(result(r), acc, mine, avg, {prev});
      }
      if (wire) b.widen({Buf::kRecv, lo(r) * 4}, result(r), mine, {fin, rounded_in});
    }
    for (int k = 1; k < n; ++k) {
      const int to = mod(r + k, n);
      if (mine) b.send(to, result(r), mine * L.ws, {fin});
    }
    for (int k = 1; k < n; ++k) {
      const int from = mod(r - k, n);
      if (!cnt(from)) continue;
      // In place, block `from` of the receive buffer is the one sent to `from` above.
      const StepId rv = b.recv(from, result(from), cnt(from) * L.ws, {sent[from]});
      if (wire) b.widen({Buf::kRecv, lo(from) * 4}, result(from), cnt(from), {rv, rounded_in});
    }
    cursor += mine;
  }
}

// Two stages of flows between every pair of ranks (the pieces, then the rounded blocks), each
// piece 1/n of the buffer. in.bytes: the bytes that cross (with a wire type, the 16-bit ones).
bool predict_f32acc(const PlanInput& in, Prediction& out) {
  if (in.coll != CollectiveKind::kAllReduce) return false;
  const int p = in.view.size();
  std::vector<topo::Flow> flows;
  for (int i = 0; i < p; ++i)
    for (int j = 0; j < p; ++j)
      if (i != j) flows.push_back({i, j, in.bytes / p});
  if (flows.empty()) return false;
  const topo::StageCost c = topo::stage_cost(in.view, in.model, flows, in.net);
  out.xfer_us = 2 * c.us;
  out.lat_us = 2 * c.b.alpha;
  out.b = c.b;
  out.reasons = {fmt::format("direct reduce-scatter then all-gather over {} ranks: 2 stages of {} flows of 1/{} of the buffer; "
                             "16-bit sums accumulated in float32 and rounded once", p, flows.size(), p),
                 fmt::format("the busiest NIC of a stage carries {:.2f}x the buffer", in.bytes > 0 ? c.nic_bytes / in.bytes : 0.0)};
  out.steps = 2.0 * (p - 1);
  return true;
}

}  // namespace weft
