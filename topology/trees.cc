// Double binary trees (NCCL's construction), shared by the tree all-reduce schedule and the planner.
#include "topology/trees.h"

#include <algorithm>

#include "runtime/base/error.h"

namespace weft::topo {

int Tree::depth() const {
  int best = 0;
  for (size_t v = 0; v < parent.size(); ++v) {
    int d = 0;
    for (int u = static_cast<int>(v); parent[u] >= 0 && d <= static_cast<int>(parent.size()); u = parent[u]) ++d;
    best = std::max(best, d);
  }
  return best;
}

void binary_tree_links(int n, int v, int* parent, int* child0, int* child1) {
  int bit = 1;
  while (bit < n && !(bit & v)) bit <<= 1;
  if (v == 0) {
    *parent = -1;
    *child0 = -1;
    *child1 = n > 1 ? bit >> 1 : -1;
    return;
  }
  int up = (v ^ bit) | (bit << 1);
  if (up >= n) up = v ^ bit;
  *parent = up;
  int low = bit >> 1;
  *child0 = low == 0 ? -1 : v - low;
  int c1 = low == 0 ? -1 : v + low;
  while (c1 >= n) {
    low >>= 1;
    c1 = low == 0 ? -1 : v + low;
  }
  *child1 = c1;
}

namespace {

// Full binary tree over [lo, hi] (even ends) whose in-order sequence is lo..hi: odd vertices are
// interior, even ones leaves. Returns the subtree root.
int full_inorder(int lo, int hi, std::vector<int>& parent) {
  if (lo == hi) return lo;
  int mid = (lo + hi) / 2;
  if (mid % 2 == 0) mid += 1;
  if (mid >= hi) mid -= 2;
  const int l = full_inorder(lo, mid - 1, parent);
  const int r = full_inorder(mid + 1, hi, parent);
  parent[l] = mid;
  parent[r] = mid;
  return mid;
}

}  // namespace

std::vector<Tree> double_binary_trees(int n) {
  require(n >= 1, "double_binary_trees: {} vertices", n);
  std::vector<int> p0(n), p1(n, -1);
  for (int v = 0; v < n; ++v) {
    int c0, c1;
    binary_tree_links(n, v, &p0[v], &c0, &c1);
  }
  if (n % 2 == 0) {
    for (int v = 0; v < n; ++v) {
      int u, c0, c1;
      binary_tree_links(n, n - 1 - v, &u, &c0, &c1);
      p1[v] = u < 0 ? -1 : n - 1 - u;
    }
  } else {
    full_inorder(0, n - 1, p1);
  }
  return {tree_from_parents(std::move(p0)), tree_from_parents(std::move(p1))};
}

Tree relabel(const Tree& pos, const std::vector<int>& order) {
  const int n = static_cast<int>(pos.parent.size());
  require(static_cast<int>(order.size()) == n, "relabel: {} names for {} vertices", order.size(), n);
  Tree t;
  t.parent.assign(n, -1);
  t.children.assign(n, {});
  for (int q = 0; q < n; ++q) {
    if (pos.parent[q] >= 0) t.parent[order[q]] = order[pos.parent[q]];
    for (int c : pos.children[q]) t.children[order[q]].push_back(order[c]);
  }
  t.root = order[pos.root];
  for (auto& c : t.children) std::sort(c.begin(), c.end());
  return t;
}

Tree tree_from_parents(const std::vector<int>& parent) {
  const int n = static_cast<int>(parent.size());
  if (n == 0) fail(ErrorCode::kInvalidArgument, "tree: no vertices");
  Tree t;
  t.parent = parent;
  t.children.assign(n, {});
  for (int v = 0; v < n; ++v) {
    const int p = parent[v];
    if (p < 0) {
      if (t.root >= 0) fail(ErrorCode::kInvalidArgument, "tree: two roots, vertices {} and {}", t.root, v);
      t.root = v;
      t.parent[v] = -1;
      continue;
    }
    if (p >= n || p == v) fail(ErrorCode::kInvalidArgument, "tree: vertex {} has parent {} (not another of 0..{})", v, p, n - 1);
    t.children[p].push_back(v);
  }
  if (t.root < 0) fail(ErrorCode::kInvalidArgument, "tree: no root (every vertex has a parent)");
  for (int v = 0; v < n; ++v) {
    int x = v, hops = 0;
    while (t.parent[x] >= 0 && hops++ <= n) x = t.parent[x];
    if (x != t.root) fail(ErrorCode::kInvalidArgument, "tree: vertex {} does not reach the root {} (a cycle)", v, t.root);
  }
  return t;
}

}  // namespace weft::topo
