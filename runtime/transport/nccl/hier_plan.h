// The host-side orchestration of the hierarchical device all-reduce (docs/GPU.md), as pure
// functions: who is in which sub-communicator, which block of the buffer each local rank owns,
// and how a block is cut into pipelined chunks. No NCCL, no device (unit-tested in
// tests/gpu/test_nccl_unit.cc); runtime/transport/nccl/hierarchical.cc does the CUDA and NCCL calls.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/collective.h"

namespace weft::nccl {

// Where a rank sits: its node communicator (color = node, rank = local rank, size = local size)
// and its rail, the cross-node communicator of the ranks with its local rank (color = local rank,
// rank = node index, size = nodes).
struct HierLayout {
  bool usable = false;
  std::string why;  // when not usable: why the flat NCCL path is taken instead
  int node = 0, nodes = 1, local_rank = 0, local_size = 1;
};
// node_of_rank: the node id of every rank. Usable when there are several nodes and every node has
// the same number of ranks (weft::node_layout, the layout the host hierarchical schedules use too;
// nodes numbered in node-id order, local ranks in rank order).
HierLayout hier_layout(const std::vector<int>& node_of_rank, int rank);

// True when a device call takes the hierarchical path: an all-reduce, WEFT_GPU_HIERARCHICAL=1,
// and a usable layout.
bool use_hierarchical(CollectiveKind kind, bool enabled, const HierLayout& layout);

// A range of elements of the buffer.
struct Range {
  uint64_t offset = 0, count = 0;
  bool operator==(const Range& o) const { return offset == o.offset && count == o.count; }
};

// The node phase of `count` elements over `local_size` ranks: an NCCL reduce-scatter (then an
// all-gather) of `even` elements per local rank over the first local_size * even elements, and the
// rest (`tail`, fewer than local_size elements) reduced to (then broadcast from) the last local
// rank. So local rank l owns block l = [l*even, (l+1)*even), and the last one also the tail.
struct NodePhase {
  uint64_t even = 0;
  Range tail;
  int tail_root = 0;
};
NodePhase node_phase(uint64_t count, int local_size);
// The block that local rank l owns after the reduce-scatter (and all-reduces across nodes).
Range owned_block(const NodePhase& p, int local_rank, int local_size);

// block cut into chunks of chunk_bytes (at least one element each); empty for an empty block.
std::vector<Range> chunks_of(Range block, uint64_t elem_size, uint64_t chunk_bytes);

}  // namespace weft::nccl
