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

// One tree's share of a tree collective: elements [0, count) of a piece, at `own` (this rank's
// input) and `result` (where the reduced or broadcast piece lands on this rank), reduced up `tree`
// to its root (`up`) and/or sent down from it (`down`), in slices of slice_bytes that pipeline.
// An interior rank combines own OP child0 OP child1 ... (children ascending) into `result`
// (acc_in_result: the all-reduce, whose result buffer holds the piece on every rank) or into
// scratch slots (the reduce-scatter, whose result exists on the root only); the root ends with
// the piece (and averages it for kAvg). With up and down, a rank sends slice j up only once slice
// j - kTreeWindowSlices has come back down (topology/trees.h). Down only: the root sends from
// `own`. Returns the end of the scratch it uses from `scratch`.
struct TreePiece {
  const topo::Tree* tree = nullptr;
  uint64_t count = 0;  // elements
  bool up = true, down = true;
  Ref own, result;
  bool acc_in_result = true;
};
uint64_t build_tree_piece(ScheduleBuilder& b, const CollectiveArgs& a, const TreePiece& p, uint64_t slice_bytes,
                          uint64_t scratch);

}  // namespace weft
