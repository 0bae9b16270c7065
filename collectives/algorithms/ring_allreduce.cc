// Ring all-reduce: a reduce-scatter followed by an all-gather around the ring r -> r+1, the data
// cut into nranks chunks and every chunk into slices that pipeline: slice j of step s+1 is sent as
// soon as slice j of step s is reduced, so reduction and transfer overlap.
//
// Determinism: chunk c is reduced in ring order starting at rank c+1 and ends at its owner, which
// sends the final bytes to everyone: every rank holds bitwise-identical results, on every run.
#include "collectives/algorithms/ring.h"

namespace weft {

void build_ring_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt) {
  const int n = b.nranks(), r = b.rank();
  const uint64_t es = dtype_size(a.dtype);
  const uint64_t total = a.count * es;
  if (a.count == 0) return;
  if (n == 1) {
    if (!a.in_place) b.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, total);
    return;
  }
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  // Chunk c covers elements [chunk_el(c), chunk_el(c+1)); every chunk has the same slice count.
  auto chunk_el = [&](uint64_t c) { return part_offset(a.count, n, c); };
  uint64_t max_chunk_bytes = (chunk_el(1) - chunk_el(0)) * es;
  uint64_t slices = std::max<uint64_t>(1, (max_chunk_bytes + opt.slice_bytes - 1) / opt.slice_bytes);
  auto slice_range = [&](int c, uint64_t j, uint64_t* off, uint64_t* bytes) {
    uint64_t c0 = chunk_el(c), cn = chunk_el(c + 1) - c0;
    uint64_t s0 = part_offset(cn, slices, j), s1 = part_offset(cn, slices, j + 1);
    *off = (c0 + s0) * es;
    *bytes = (s1 - s0) * es;
  };
  // In place, incoming partial sums land in scratch slots (reused round-robin); out of place they
  // land straight in the receive buffer and are reduced with the send buffer.
  const uint64_t kSlots = 4;
  const uint64_t max_chunk_el = chunk_el(1) - chunk_el(0);
  const uint64_t slot_bytes = (max_chunk_el + slices - 1) / slices * es;
  if (a.in_place) b.need_scratch(kSlots * slot_bytes);
  std::vector<StepId> slot_user(kSlots, kNoStep);
  uint64_t slot_next = 0;

  // rs_send[s][j]: the send of step s, slice j (needed by the all-gather's receive, WAR hazard);
  // last_write[j]: the step that last produced slice j of the chunk about to be sent.
  std::vector<std::vector<StepId>> rs_send(n - 1, std::vector<StepId>(slices, kNoStep));
  std::vector<StepId> ready(slices, kNoStep);
  for (int s = 0; s < n - 1; ++s) {
    int send_chunk = ((r - s) % n + n) % n;
    int recv_chunk = ((r - s - 1) % n + n) % n;
    std::vector<StepId> produced(slices, kNoStep);
    for (uint64_t j = 0; j < slices; ++j) {
      uint64_t off, bytes;
      slice_range(send_chunk, j, &off, &bytes);
      if (bytes) {
        Ref src{s == 0 ? Buf::kSend : Buf::kRecv, off};
        rs_send[s][j] = b.send(next, src, bytes, {ready[j]});
      }
      slice_range(recv_chunk, j, &off, &bytes);
      if (!bytes) continue;
      if (a.in_place) {
        uint64_t slot = slot_next++ % kSlots;
        Ref tmp{Buf::kScratch, slot * slot_bytes};
        StepId rv = b.recv(prev, tmp, bytes, {slot_user[slot]});
        StepId red = b.reduce({Buf::kRecv, off}, tmp, bytes, {rv});
        slot_user[slot] = red;
        produced[j] = red;
      } else {
        StepId rv = b.recv(prev, {Buf::kRecv, off}, bytes);
        produced[j] = b.reduce({Buf::kRecv, off}, {Buf::kSend, off}, bytes, {rv});
      }
      if (s == n - 2 && a.op == RedOp::kAvg) produced[j] = b.avg({Buf::kRecv, off}, bytes, {produced[j]});
    }
    ready = produced;
  }
  // All-gather: the owned chunk is (r+1) mod n; forward what arrives.
  for (int s = 0; s < n - 1; ++s) {
    int send_chunk = ((r + 1 - s) % n + n) % n;
    int recv_chunk = ((r - s) % n + n) % n;
    std::vector<StepId> produced(slices, kNoStep);
    for (uint64_t j = 0; j < slices; ++j) {
      uint64_t off, bytes;
      slice_range(send_chunk, j, &off, &bytes);
      if (bytes) b.send(next, {Buf::kRecv, off}, bytes, {ready[j]});
      slice_range(recv_chunk, j, &off, &bytes);
      if (bytes) produced[j] = b.recv(prev, {Buf::kRecv, off}, bytes, {rs_send[s][j]});
    }
    ready = produced;
  }
}

}  // namespace weft
