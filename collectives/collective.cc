#include "collectives/collective.h"
#include <algorithm>

namespace weft {

uint64_t AllToAllvSplits::sent() const {
  uint64_t n = 0;
  for (uint64_t c : send_counts) n += c;
  return n;
}
uint64_t AllToAllvSplits::received() const {
  uint64_t n = 0;
  for (uint64_t c : recv_counts) n += c;
  return n;
}

namespace {
// The bytes up to the end of the furthest non-empty block (kAllToAllv).
uint64_t extent(const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs, uint64_t es) {
  uint64_t end = 0;
  for (size_t p = 0; p < counts.size() && p < displs.size(); ++p)
    if (counts[p]) end = std::max(end, (displs[p] + counts[p]) * es);
  return end;
}
}  // namespace

uint64_t send_bytes(const CollectiveArgs& a, int rank, int nranks) {
  if (a.kind == CollectiveKind::kAllToAllv)
    return a.splits ? extent(a.splits->send_counts, a.splits->send_displs, dtype_size(a.dtype)) : 0;
  uint64_t b = a.count * dtype_size(a.dtype);
  switch (a.kind) {
    case CollectiveKind::kReduceScatter: case CollectiveKind::kAllToAll: return b * nranks;
    case CollectiveKind::kBroadcast: return rank == a.root ? b : 0;
    case CollectiveKind::kBarrier: case CollectiveKind::kRecv: return 0;
    default: return b;
  }
}

uint64_t recv_bytes(const CollectiveArgs& a, int rank, int nranks) {
  if (a.kind == CollectiveKind::kAllToAllv)
    return a.splits ? extent(a.splits->recv_counts, a.splits->recv_displs, dtype_size(a.dtype)) : 0;
  uint64_t b = a.count * dtype_size(a.dtype);
  switch (a.kind) {
    case CollectiveKind::kAllGather: case CollectiveKind::kAllToAll: return b * nranks;
    case CollectiveKind::kReduce: return rank == a.root ? b : 0;
    case CollectiveKind::kBarrier: case CollectiveKind::kSend: return 0;
    default: return b;
  }
}

}  // namespace weft

#include <fmt/format.h>

namespace weft {
namespace {
uint16_t hash3(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<uint16_t>(x & 7);
}
uint16_t kind_code(CollectiveKind k) {
  return static_cast<uint16_t>(k == CollectiveKind::kRecv ? CollectiveKind::kSend : k);
}
}  // namespace

uint16_t call_signature(const CollectiveArgs& a) {
  bool rooted = a.kind == CollectiveKind::kBroadcast || a.kind == CollectiveKind::kReduce;
  bool reducing = a.kind == CollectiveKind::kAllReduce || a.kind == CollectiveKind::kReduceScatter ||
                  a.kind == CollectiveKind::kReduce;
  uint16_t op = reducing ? static_cast<uint16_t>(a.op) : 0;
  uint16_t dt = a.kind == CollectiveKind::kBarrier ? 0 : static_cast<uint16_t>(a.dtype);
  // An all-to-all's unequal splits differ between the ranks by design: a count that does not match
  // its peer's shows as a message of the wrong size (Execution::mismatch names both ranks).
  uint16_t count = a.kind == CollectiveKind::kBarrier || a.kind == CollectiveKind::kAllToAllv ? 0 : hash3(a.count);
  uint16_t root = rooted ? hash3(static_cast<uint64_t>(a.root)) : 0;
  return static_cast<uint16_t>((kind_code(a.kind) << 12) | (dt << 9) | (op << 6) | (count << 3) | root);
}

std::string signature_difference(uint16_t mine, uint16_t theirs) {
  std::string out;
  auto add = [&](const std::string& s) { out += out.empty() ? s : ", " + s; };
  unsigned mk = mine >> 12, tk = theirs >> 12;
  if (mk != tk) {
    auto name = [](unsigned k) {
      return k == static_cast<unsigned>(CollectiveKind::kSend) ? std::string("send/recv")
             : k < kNumCollectiveKinds ? std::string(collective_name(static_cast<CollectiveKind>(k)))
                                       : std::string("?");
    };
    add(fmt::format("the collective ({} here, {} there)", name(mk), name(tk)));
    return out;
  }
  unsigned md = (mine >> 9) & 7, td = (theirs >> 9) & 7;
  if (md != td) add(fmt::format("the data type ({} here, {} there)", dtype_name(static_cast<DataType>(md)), dtype_name(static_cast<DataType>(td))));
  unsigned mo = (mine >> 6) & 7, to = (theirs >> 6) & 7;
  if (mo != to) add(fmt::format("the reduction op ({} here, {} there)", redop_name(static_cast<RedOp>(mo)), redop_name(static_cast<RedOp>(to))));
  if (((mine >> 3) & 7) != ((theirs >> 3) & 7)) add("the count");
  if ((mine & 7) != (theirs & 7)) add("the root");
  return out.empty() ? std::string("the arguments") : out;
}

std::string describe_call(const CollectiveArgs& a, uint64_t seq) {
  switch (a.kind) {
    case CollectiveKind::kBarrier: return fmt::format("barrier #{}", seq);
    case CollectiveKind::kSend: return fmt::format("send #{} (count {}, {}, to rank {})", seq, a.count, dtype_name(a.dtype), a.root);
    case CollectiveKind::kRecv: return fmt::format("recv #{} (count {}, {}, from rank {})", seq, a.count, dtype_name(a.dtype), a.root);
    case CollectiveKind::kBroadcast: return fmt::format("broadcast #{} (count {}, {}, root {})", seq, a.count, dtype_name(a.dtype), a.root);
    case CollectiveKind::kReduce: return fmt::format("reduce #{} (count {}, {}, {}, root {})", seq, a.count, dtype_name(a.dtype), redop_name(a.op), a.root);
    case CollectiveKind::kAllToAllv:
      return fmt::format("alltoallv #{} (sends {} and receives {} elements, {})", seq, a.splits ? a.splits->sent() : 0,
                         a.splits ? a.splits->received() : 0, dtype_name(a.dtype));
    case CollectiveKind::kAllGather: case CollectiveKind::kAllToAll:
      return fmt::format("{} #{} (count {}, {})", collective_name(a.kind), seq, a.count, dtype_name(a.dtype));
    default: return fmt::format("{} #{} (count {}, {}, {})", collective_name(a.kind), seq, a.count, dtype_name(a.dtype), redop_name(a.op));
  }
}

}  // namespace weft
