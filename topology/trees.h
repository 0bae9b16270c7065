// Double binary trees: two binary trees over the same vertices in which every vertex is interior
// in at most one, so that each carries half the data and no vertex forwards both halves. The tree
// all-reduce builds its schedule on them (over ranks in node order) and the planner models it.
// No dependencies beyond the standard library: the collectives use it too.
#pragma once
#include <vector>

namespace weft::topo {

// The tree all-reduce's pipeline (tree_allreduce.cc; the planner models the same): each half is
// cut into slices of slice_bytes / kTreeSliceDivisor, and a rank sends slice j up its tree only
// once slice j - kTreeWindowSlices has come back down to it, so that each tree keeps about
// 2 x slice_bytes per rank in flight. Without that window a leaf posts its whole half at once; over a
// transport that sends eagerly in order per connection (UCX over TCP), the other tree's slices on
// the same connection then queue behind it and the two trees stall each other (4 nodes x 1 rank,
// 1 Gbit/s: 1.6x the ring's time instead of the 1.33x their bytes allow). A window of 4 slices was
// too short: a slice's round trip crosses 2 x depth links, each shared by the other edges of
// both trees, so 4 slices covered about one round of the busiest link, and the links idled
// between rounds (4x1 over links shaped with a 96 KiB token bucket: 1.35-1.40 s at 64 MiB against
// 1.18 s with 8; the event level plays the same stall: 1.47x the closed form with 4, 1.14x with 8).
inline constexpr int kTreeSliceDivisor = 4;
inline constexpr int kTreeWindowSlices = 8;

// A rooted tree over vertices 0..n-1.
struct Tree {
  int root = -1;
  std::vector<int> parent;                 // -1 for the root
  std::vector<std::vector<int>> children;  // at most two per vertex
  int depth() const;                       // edges on the longest root-to-leaf path
  bool is_leaf(int v) const { return children.at(v).empty(); }
};

// A tree of a packing (topology/forest.h, the `forest` algorithm): it carries `share` of its
// root's shard (the shares of one root's trees sum to 1).
struct WeightedTree {
  Tree tree;
  double share = 0;
};

// A tree over n vertices from its parent array (-1 for the root): children ascending. Throws
// weft::Error (kInvalidArgument) naming the vertex when parent does not make one tree over all n.
Tree tree_from_parents(const std::vector<int>& parent);

// NCCL's in-order binary tree: vertex v's parent and children (-1: none).
void binary_tree_links(int n, int v, int* parent, int* child0, int* child1);
// Tree 1: the in-order binary tree (odd vertices are leaves). Tree 2: its mirror (n even) or, for odd
// n, the full in-order tree whose interior vertices are the odd ones. Every vertex is a leaf in one
// tree and interior in at most one.
std::vector<Tree> double_binary_trees(int n);
// The same tree with vertex q renamed order[q] (order: a permutation of 0..n-1); children ascending.
Tree relabel(const Tree& t, const std::vector<int>& order);

}  // namespace weft::topo
