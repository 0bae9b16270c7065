#include "collectives/algorithms/builtin.h"

namespace weft {

void build_dissemination_barrier(ScheduleBuilder& b, const CollectiveArgs&, const AlgoOptions&) {
  const int n = b.nranks(), r = b.rank();
  StepId prev = kNoStep;
  for (int k = 1; k < n; k *= 2) {
    StepId s = b.send((r + k) % n, {Buf::kRecv, 0}, 0, {prev});
    StepId v = b.recv((r - k % n + n) % n, {Buf::kRecv, 0}, 0, {prev});
    (void)s;
    prev = v;
  }
}

Schedule build_p2p_schedule(const CollectiveArgs& a, int rank, int nranks) {
  ScheduleBuilder b(rank, nranks, a.dtype, a.op);
  uint64_t bytes = a.count * dtype_size(a.dtype);
  if (a.kind == CollectiveKind::kSend) b.send(a.root, {Buf::kSend, 0}, bytes);
  else b.recv(a.root, {Buf::kRecv, 0}, bytes);
  Schedule s = b.finish();
  s.algorithm = "p2p";
  s.validate(send_bytes(a, rank, nranks), recv_bytes(a, rank, nranks));
  return s;
}

}  // namespace weft
