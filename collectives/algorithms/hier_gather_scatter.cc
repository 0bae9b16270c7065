// Hierarchical all-gather and reduce-scatter over N nodes of L ranks (hier_layout): the phase that
// crosses nodes runs along rails (the ranks with the same local index, one per node), so each
// node's link carries (N-1) * L blocks each way instead of the n-1 blocks a flat ring pushes
// through every crossing edge: 1.5x fewer on 2 nodes of 2 ranks, L(N-1)/(NL-1) in general.
//
//   all-gather:     (1) ring all-gather of the rail's blocks along the rail, then (2) ring
//                   all-gather inside the node of the N-block "chunks" (chunk p = the blocks of the
//                   ranks with local index p on every node).
//   reduce-scatter: (1) ring reduce-scatter inside the node of those chunks (local index p ends
//                   with the node's sum of every block of rail p), then (2) ring reduce-scatter of
//                   the node sums along the rail.
//
// Pipelined in slices of each block, and the phases overlap: a slice of the second phase waits
// only for the step of the first phase that made that slice final. Within a chunk the blocks are
// ordered as the other phase produces or consumes them (the rail ring's order), so the first
// bytes to move in one phase are the first the other finishes. Deterministic: every block's
// combination order is fixed by the layout. Where the layout does not suit (no node ids, one node,
// one rank per node, unequal nodes) both build the flat ring.
#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/slicing.h"

namespace weft {

using StepGrid = std::vector<std::vector<StepId>>;  // [block][slice]

void build_hier_allgather(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const HierPosition h = hier_position(opt.node_of_rank, b.nranks(), b.rank());
  if (h.nodes.empty() || a.count == 0) return build_ring_allgather(b, a, opt);
  const int N = h.num_nodes(), L = h.local_size(), K = h.node, li = h.local, me = b.rank();
  const uint64_t es = dtype_size(a.dtype), block = a.count * es;
  const SlicedRange blk(0, a.count, es, slices_for(a.count, es, opt.slice_bytes));
  const uint64_t S = blk.slices;
  auto at = [&](int k, int l) { return static_cast<uint64_t>(h.nodes[mod(k, N)][mod(l, L)]) * block; };
  if (!a.in_place) b.copy({Buf::kRecv, static_cast<uint64_t>(me) * block}, {Buf::kSend, 0}, block);

  // (1) Rail all-gather: at step s, send the block of node K-s (own block from the send buffer
  // first), receive that of node K-s-1. arrived[k][j]: the receive that delivered slice j of
  // node k's block on this rail.
  StepGrid arrived(N, std::vector<StepId>(S, kNoStep));
  {
    const int next = h.nodes[mod(K + 1, N)][li], prev = h.nodes[mod(K - 1, N)][li];
    for (int s = 0; s < N - 1; ++s) {
      const int out_k = mod(K - s, N), in_k = mod(K - s - 1, N);
      for (uint64_t j = 0; j < S; ++j) {
        const uint64_t off = blk.off(j), bytes = blk.bytes(j);
        if (!bytes) continue;
        Ref src = s == 0 ? Ref{Buf::kSend, off} : Ref{Buf::kRecv, at(out_k, li) + off};
        b.send(next, src, bytes, {arrived[out_k][j]});
        arrived[in_k][j] = b.recv(prev, {Buf::kRecv, at(in_k, li) + off}, bytes);
      }
    }
  }
  // (2) All-gather inside the node: at step s, send chunk li-s, receive chunk li-s-1, each block
  // of a chunk in the order K, K-1, ... (the order in which (1) delivers them).
  {
    const int next = h.nodes[K][mod(li + 1, L)], prev = h.nodes[K][mod(li - 1, L)];
    StepGrid ready(N, std::vector<StepId>(S, kNoStep));
    for (int s = 0; s < L - 1; ++s) {
      const int out_p = mod(li - s, L), in_p = mod(li - s - 1, L);
      StepGrid produced(N, std::vector<StepId>(S, kNoStep));
      for (int t = 0; t < N; ++t) {
        const int k = mod(K - t, N);
        for (uint64_t j = 0; j < S; ++j) {
          const uint64_t off = blk.off(j), bytes = blk.bytes(j);
          if (!bytes) continue;
          if (s == 0) {
            Ref src = t == 0 ? Ref{Buf::kSend, off} : Ref{Buf::kRecv, at(k, li) + off};
            b.send(next, src, bytes, {arrived[k][j]});
          } else {
            b.send(next, {Buf::kRecv, at(k, out_p) + off}, bytes, {ready[t][j]});
          }
          produced[t][j] = b.recv(prev, {Buf::kRecv, at(k, in_p) + off}, bytes);
        }
      }
      ready = std::move(produced);
    }
  }
}

void build_hier_reducescatter(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const HierPosition h = hier_position(opt.node_of_rank, b.nranks(), b.rank());
  if (h.nodes.empty() || a.count == 0) return build_ring_reducescatter(b, a, opt);
  const int N = h.num_nodes(), L = h.local_size(), K = h.node, li = h.local;
  const uint64_t es = dtype_size(a.dtype), block = a.count * es;
  const SlicedRange blk(0, a.count, es, slices_for(a.count, es, opt.slice_bytes));
  const uint64_t S = blk.slices;
  auto at = [&](int k, int l) { return static_cast<uint64_t>(h.nodes[mod(k, N)][mod(l, L)]) * block; };
  // Scratch: the node sums of this rail's blocks (by node index), the two banks of partial chunks
  // of (1), the two banks of partial blocks of (2). Neither the send buffer nor, until the last
  // combination of a slice, the receive buffer is written (in place the receive buffer is this
  // rank's block of the send buffer, read last by the node sum that this combination waits for).
  const uint64_t sums = 0, banks1 = N * block, banks2 = 3 * N * block;
  b.need_scratch(3 * N * block + 2 * block);

  // (1) Reduce-scatter inside the node: chunk p (the blocks of local index p, in the order K-1,
  // K-2, ..., K, which (2) consumes) starts at local index p+1 and ends, summed, at p.
  StepGrid node_sum(N, std::vector<StepId>(S, kNoStep));  // [k][j]: made slice j of node k's sum
  {
    const int next = h.nodes[K][mod(li + 1, L)], prev = h.nodes[K][mod(li - 1, L)];
    StepGrid ready(N, std::vector<StepId>(S, kNoStep));
    StepGrid reader[2] = {StepGrid(N, std::vector<StepId>(S, kNoStep)), StepGrid(N, std::vector<StepId>(S, kNoStep))};
    for (int s = 0; s < L - 1; ++s) {
      const int out_p = mod(li - 1 - s, L), in_p = mod(li - 2 - s, L);
      const uint64_t in_bank = banks1 + (s % 2) * N * block, out_bank = banks1 + ((s + 1) % 2) * N * block;
      for (int t = 0; t < N; ++t) {
        const int k = mod(K - 1 - t, N);
        for (uint64_t j = 0; j < S; ++j) {
          const uint64_t off = blk.off(j), bytes = blk.bytes(j);
          if (!bytes) continue;
          if (s == 0) {
            b.send(next, {Buf::kSend, at(k, out_p) + off}, bytes);
          } else {
            reader[(s + 1) % 2][t][j] = b.send(next, {Buf::kScratch, out_bank + t * block + off}, bytes, {ready[t][j]});
          }
          const Ref tmp{Buf::kScratch, in_bank + t * block + off}, mine{Buf::kSend, at(k, in_p) + off};
          const StepId rv = b.recv(prev, tmp, bytes, {reader[s % 2][t][j]});
          if (s < L - 2) ready[t][j] = b.reduce(tmp, mine, bytes, {rv});
          else node_sum[k][j] = b.reduce3({Buf::kScratch, sums + k * block + off}, tmp, mine, bytes, {rv});
        }
      }
    }
  }
  // (2) Reduce-scatter of the node sums along the rail: node k's block starts at node k+1 and
  // ends, summed over the nodes, at node k (in the receive buffer).
  {
    const int next = h.nodes[mod(K + 1, N)][li], prev = h.nodes[mod(K - 1, N)][li];
    std::vector<StepId> ready(S, kNoStep), reader[2] = {std::vector<StepId>(S, kNoStep), std::vector<StepId>(S, kNoStep)};
    for (int s = 0; s < N - 1; ++s) {
      const int out_k = mod(K - 1 - s, N), in_k = mod(K - 2 - s, N);
      const uint64_t in_bank = banks2 + (s % 2) * block, out_bank = banks2 + ((s + 1) % 2) * block;
      for (uint64_t j = 0; j < S; ++j) {
        const uint64_t off = blk.off(j), bytes = blk.bytes(j);
        if (!bytes) continue;
        if (s == 0) {
          b.send(next, {Buf::kScratch, sums + out_k * block + off}, bytes, {node_sum[out_k][j]});
        } else {
          reader[(s + 1) % 2][j] = b.send(next, {Buf::kScratch, out_bank + off}, bytes, {ready[j]});
        }
        const Ref tmp{Buf::kScratch, in_bank + off}, mine{Buf::kScratch, sums + in_k * block + off};
        const StepId rv = b.recv(prev, tmp, bytes, {reader[s % 2][j]});
        if (s < N - 2) {
          ready[j] = b.reduce(tmp, mine, bytes, {rv, node_sum[in_k][j]});
        } else {
          const StepId red = b.reduce3({Buf::kRecv, off}, tmp, mine, bytes, {rv, node_sum[in_k][j]});
          if (a.op == RedOp::kAvg) b.avg({Buf::kRecv, off}, bytes, {red});
        }
      }
    }
  }
}

}  // namespace weft
