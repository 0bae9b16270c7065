#include "runtime/transport/nccl/hier_plan.h"

#include <algorithm>

#include "runtime/base/error.h"

namespace weft::nccl {

HierLayout hier_layout(const std::vector<int>& node_of_rank, int rank) {
  HierLayout h;
  if (rank < 0 || static_cast<size_t>(rank) >= node_of_rank.size()) {
    h.why = fmt::format("rank {} is outside the communicator", rank);
    return h;
  }
  int nodes = node_of_rank.empty() ? 0 : *std::max_element(node_of_rank.begin(), node_of_rank.end()) + 1;
  std::vector<int> per_node(static_cast<size_t>(std::max(nodes, 0)), 0);
  for (int n : node_of_rank) {
    if (n < 0) {
      h.why = "a rank has no node";
      return h;
    }
    per_node[n]++;
  }
  h.nodes = nodes;
  h.node = node_of_rank[rank];
  h.local_size = per_node[h.node];
  h.local_rank = static_cast<int>(std::count(node_of_rank.begin(), node_of_rank.begin() + rank, h.node));
  if (nodes < 2) {
    h.why = "the communicator spans one node";
    return h;
  }
  for (int n = 0; n < nodes; ++n) {
    if (per_node[n] != per_node[0]) {
      h.why = fmt::format("nodes have different numbers of ranks (node 0: {}, node {}: {})", per_node[0], n, per_node[n]);
      return h;
    }
  }
  h.usable = true;
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
