// The binary trees of the double-binary-tree all-reduce, exposed for tests.
#pragma once
#include <vector>

#include "collectives/collective.h"
#include "topology/trees.h"

namespace weft {

// Tree `which` (0 or 1) of the double binary tree over n ranks (topo::double_binary_trees, NCCL's
// construction: every rank is interior in at most one tree), laid over the ranks in node order
// (`node_order`: the nodes one after the other), so that each tree crosses between nodes as few
// times as its shape allows whatever the rank numbering. Vertices are ranks.
topo::Tree rank_tree(const AlgoOptions& opt, int n, int which);

}  // namespace weft
