// Deterministic mode's schedules and eligibility (deterministic.h; docs/DETERMINISM.md).
//
// Determinism: every element is combined by its owner in rank order, ((x_0 OP x_1) OP x_2) ...
// OP x_{n-1}, then divided once for an average: the order depends on nothing but n. Slices only
// cut the elements into runs folded alike; the owner of an element (which depends on count)
// computes the same value any owner would.
#include "collectives/algorithms/deterministic.h"


#include <fmt/format.h>

#include "collectives/algorithms/slicing.h"

namespace weft {

namespace {

// Each rank's block of the reduction: elements [first[p], first[p] + count[p]) of the send buffer
// are reduced on rank p (count[p] == 0: p owns nothing).
struct Blocks {
  std::vector<uint64_t> first, count;
};

struct Gathered {
  SlicedRange own;                         // this rank's block, sliced
  std::vector<StepId> folded;              // per slice of it: the fold's last step
  std::vector<std::vector<StepId>> sent;   // per peer p, per slice of p's block: the send of this rank's part
};

SlicedRange sliced(const Blocks& blocks, int p, uint64_t es, const AlgoOptions& opt) {
  return SlicedRange(blocks.first[p], blocks.count[p], es, slices_for(blocks.count[p], es, opt.slice_bytes));
}

// Sends this rank's part of every other block to its owner, receives every rank's part of its own
// block into scratch (rank p's at p * block), and folds each slice in rank order into
// recv + dst_base. In place, this rank's own part lies where the fold writes: for a rank past 1
// (whose part is not among the first step's operands) it is copied to its scratch slot first.
Gathered gather_fold(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt, const Blocks& blocks,
                     uint64_t dst_base) {
  const int n = b.nranks(), r = b.rank();
  const uint64_t es = dtype_size(a.dtype);
  Gathered g;
  g.sent.resize(n);
  for (int p = 0; p < n; ++p) {
    if (p == r || !blocks.count[p]) continue;
    const SlicedRange blk = sliced(blocks, p, es, opt);
    for (uint64_t j = 0; j < blk.slices; ++j) g.sent[p].push_back(b.send(p, {Buf::kSend, blk.off(j)}, blk.bytes(j)));
  }
  if (!blocks.count[r]) return g;
  g.own = sliced(blocks, r, es, opt);
  const uint64_t block = blocks.count[r] * es, base = blocks.first[r] * es;
  b.need_scratch(n * block);
  std::vector<std::vector<StepId>> got(n);
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    for (uint64_t j = 0; j < g.own.slices; ++j)
      got[p].push_back(b.recv(p, {Buf::kScratch, p * block + g.own.off(j) - base}, g.own.bytes(j)));
  }
  const bool copy_own = a.in_place && r >= 2;
  for (uint64_t j = 0; j < g.own.slices; ++j) {
    const uint64_t bytes = g.own.bytes(j), o = g.own.off(j) - base;
    Ref own{Buf::kSend, g.own.off(j)};
    StepId own_ready = kNoStep;
    if (copy_own) {
      own = Ref{Buf::kScratch, r * block + o};
      own_ready = b.copy(own, {Buf::kSend, g.own.off(j)}, bytes);
    }
    auto src = [&](int p) { return p == r ? own : Ref{Buf::kScratch, p * block + o}; };
    auto ready = [&](int p) { return p == r ? own_ready : got[p][j]; };
    const Ref dst{Buf::kRecv, dst_base + o};
    StepId last = b.reduce3(dst, src(0), src(1), bytes);
    b.add_dep(last, own_ready);
    if (r != 0) b.add_dep(last, ready(0));
    if (r != 1) b.add_dep(last, ready(1));
    for (int p = 2; p < n; ++p) {
      last = b.reduce(dst, src(p), bytes, {last});
      if (p != r) b.add_dep(last, ready(p));
    }
    if (a.op == RedOp::kAvg) last = b.avg(dst, bytes, {last});
    g.folded.push_back(last);
  }
  return g;
}

void copy_alone(ScheduleBuilder& b, const CollectiveArgs& a) {
  if (!a.in_place) b.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, a.count * dtype_size(a.dtype));
}

}  // namespace

void build_det_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  if (trivial_allreduce(b, a)) return;
  const int n = b.nranks(), r = b.rank();
  const uint64_t es = dtype_size(a.dtype);
  Blocks blocks;
  for (int p = 0; p < n; ++p) {
    blocks.first.push_back(part_offset(a.count, n, p));
    blocks.count.push_back(part_offset(a.count, n, p + 1) - blocks.first.back());
  }
  const Gathered g = gather_fold(b, a, opt, blocks, blocks.first[r] * es);
  // Every owner sends its folded block to every rank. In place, a rank's receive of block p
  // overwrites its own part of it: after that part was sent (the same slices).
  for (int p = 0; p < n; ++p) {
    if (p == r || !blocks.count[r]) continue;
    for (uint64_t j = 0; j < g.own.slices; ++j) b.send(p, {Buf::kRecv, g.own.off(j)}, g.own.bytes(j), {g.folded[j]});
  }
  for (int p = 0; p < n; ++p) {
    if (p == r || !blocks.count[p]) continue;
    const SlicedRange blk = sliced(blocks, p, es, opt);
    for (uint64_t j = 0; j < blk.slices; ++j)
      b.recv(p, {Buf::kRecv, blk.off(j)}, blk.bytes(j), {a.in_place ? g.sent[p][j] : kNoStep});
  }
}

void build_det_reducescatter(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  if (a.count == 0) return;
  const int n = b.nranks();
  if (n == 1) return copy_alone(b, a);
  Blocks blocks;
  for (int p = 0; p < n; ++p) {
    blocks.first.push_back(static_cast<uint64_t>(p) * a.count);
    blocks.count.push_back(a.count);
  }
  gather_fold(b, a, opt, blocks, 0);
}

void build_det_reduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  if (a.count == 0) return;
  const int n = b.nranks();
  if (n == 1) return copy_alone(b, a);
  Blocks blocks;
  blocks.first.assign(n, 0);
  blocks.count.assign(n, 0);
  blocks.count[a.root] = a.count;
  gather_fold(b, a, opt, blocks, 0);
}

bool reduces(CollectiveKind kind) {
  return kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kReduce;
}

const Algorithm* deterministic_algorithm(const Algorithm* chosen, CollectiveKind kind) {
  using K = CollectiveKind;
  static const std::vector<Algorithm> rows = {
      {"det", "Deterministic all-reduce: each rank's share gathered to it, folded in rank order, sent to every rank.",
       {K::kAllReduce}, build_det_allreduce, "deterministic", nullptr},
      {"det", "Deterministic reduce-scatter: each block gathered to its rank and folded in rank order.",
       {K::kReduceScatter}, build_det_reducescatter, "deterministic", nullptr},
      {"det", "Deterministic reduce: every rank's buffer to the root, folded in rank order.", {K::kReduce},
       build_det_reduce, "deterministic", nullptr},
  };
  if (!reduces(kind)) return chosen;
  // f32acc (16-bit sums, the wire type) is replaced too: its float32 sums rounded once are not the
  // bits of the direct paths' and these schedules' rank-order fold in the type itself, which
  // deterministic mode uses on every path (DirectContext::fold16); the wire type is off here.
  for (const Algorithm& row : rows)
    if (row.kinds.front() == kind) return &row;
  return chosen;
}

std::string deterministic_explanation(CollectiveKind kind, const std::string& wanted) {
  return fmt::format("deterministic mode: every element of this {} combined in rank order{}; the table's schedules "
                     "(ring, tree, rhd, hier, forest, chain, binomial) combine in orders that depend on the size or "
                     "the algorithm and are not eligible (docs/DETERMINISM.md)",
                     collective_name(kind), wanted.empty() ? "" : fmt::format(" ('{}' was asked for)", wanted));
}

}  // namespace weft
