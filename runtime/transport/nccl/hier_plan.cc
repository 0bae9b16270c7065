#include "runtime/transport/nccl/hier_plan.h"

#include <algorithm>

#include "collectives/algorithms/builtin.h"
#include "runtime/base/error.h"

namespace weft::nccl {

HierLayout hier_layout(const std::vector<int>& node_of_rank, int rank) {
  HierLayout h;
  if (rank < 0 || static_cast<size_t>(rank) >= node_of_rank.size()) {
    h.why = fmt::format("rank {} is outside the communicator", rank);
    return h;
  }
  NodeLayout l = node_layout(node_of_rank, static_cast<int>(node_of_rank.size()));
  h.why = l.why;
  h.nodes = static_cast<int>(l.nodes.size());
  for (int k = 0; k < h.nodes; ++k) {
    auto it = std::find(l.nodes[k].begin(), l.nodes[k].end(), rank);
    if (it == l.nodes[k].end()) continue;
    h.node = k;
    h.local_rank = static_cast<int>(it - l.nodes[k].begin());
    h.local_size = static_cast<int>(l.nodes[k].size());
  }
  h.usable = h.why.empty();
  return h;
}

bool use_hierarchical(CollectiveKind kind, bool enabled, const HierLayout& layout) {
  return enabled && kind == CollectiveKind::kAllReduce && layout.usable;
}

NodePhase node_phase(uint64_t count, int local_size) {
  require(local_size >= 1, "node_phase: local size {}", local_size);
  NodePhase p;
  auto l = static_cast<uint64_t>(local_size);
  p.even = count / l;
  p.tail = Range{p.even * l, count - p.even * l};
  p.tail_root = local_size - 1;
  return p;
}

Range owned_block(const NodePhase& p, int local_rank, int local_size) {
  Range r{static_cast<uint64_t>(local_rank) * p.even, p.even};
  if (local_rank == local_size - 1) r.count += p.tail.count;
  return r;
}

std::vector<Range> chunks_of(Range block, uint64_t elem_size, uint64_t chunk_bytes) {
  std::vector<Range> out;
  uint64_t per = std::max<uint64_t>(1, chunk_bytes / std::max<uint64_t>(1, elem_size));
  for (uint64_t done = 0; done < block.count; done += per) {
    out.push_back(Range{block.offset + done, std::min(per, block.count - done)});
  }
  return out;
}

}  // namespace weft::nccl
