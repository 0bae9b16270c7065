// Reproducible across rank counts (weftAllReduceShards; docs/DETERMINISM.md, "Virtual shards"):
// an all-reduce over a fixed number V of virtual shards, combined by one binary tree over V
// whatever the number of ranks that hold them.
//
// The tree: the shards [lo, hi) split into [lo, mid) and [mid, hi) with mid = lo + ceil((hi-lo)/2),
// down to single shards; every internal node is left OP right. With R ranks, rank r holds the
// V/R shards [r V/R, (r+1) V/R), which must be a node of that tree (an aligned subtree): it
// combines them by the subtree, and the ranks' partial results are combined by the tree's top.
// So 1, 2, 4, ... ranks give the same bits for every element.
#pragma once
#include <cstdint>
#include <string>

#include "collectives/datatype.h"

namespace weft {

class Communicator;

// Why `ranks` ranks cannot hold `shards` virtual shards as aligned subtrees ("" when they can).
std::string shard_layout_problem(int shards, int ranks);

// Collective over comm. send: this rank's shards (shards / size of them, one after the other,
// `count` elements each); recv: `count` elements, the tree's result on every rank (kAvg: divided
// by `shards` once at the end). kInvalidArgument naming why when the layout is impossible.
// Costs an all-to-all and an all-gather of count elements (padded to a multiple of the ranks).
void all_reduce_shards(Communicator& comm, const void* send, void* recv, uint64_t count, int shards, DataType dtype,
                       RedOp op);

}  // namespace weft
