// The binary trees of the double-binary-tree all-reduce, exposed for tests and weft-topo.
#pragma once
#include <vector>

namespace weft {

struct BinaryTree {
  std::vector<int> parent;                 // -1 for the root
  std::vector<std::vector<int>> children;  // at most two, ascending
  int root = 0;
};

// Tree 0: the "bit" tree over ranks 0..n-1 rooted at 0 (rank p's parent clears the lowest set
// bit of p and sets the next one, falling back to clearing it when that is out of range); odd
// ranks are its leaves. Tree 1: its mirror (rank n-1-p) when n is even, its shift by one (rank
// p+1 mod n) when n is odd, so that the leaves of one tree are the inner ranks of the other.
BinaryTree double_binary_tree(int n, int which);

}  // namespace weft
