// Packed spanning trees (the `forest` algorithm's plan): for the job's network as a capacitated
// graph (NetGraph), the all-gather that no schedule can beat and a packing of spanning trees that
// comes close to it.
//
// The bound (ForestColl, arXiv 2402.06787): in an all-gather every rank's shard must leave every
// set S of vertices that holds its rank, so the time per byte of a shard is at least
// |ranks in S| / (bandwidth leaving S) for the worst S. Exactly: T* is the least T for which, with
// every edge's bandwidth x T as capacity and a source giving 1 to every rank, every rank can
// receive n (one max-flow per rank, a binary search on T); switches need no special care, since
// only ranks hold shards. Reduce-scatter is the same on the reversed graph (Weft's graphs are
// symmetric), an all-reduce built of the two pays both.
//
// The packing: multiplicative weights (as Blink's approximate packing, over every root): in
// rounds, every root takes the cheapest spanning arborescence (Chu-Liu/Edmonds) over its logical
// edges, each priced by the links of its route with a weight that grows exponentially with the
// load already on the link; each round adds 1/rounds of the root's shard to its tree. The trees'
// shares are then rebalanced (Frank-Wolfe on a soft maximum of the links' loads). Packings of
// 1..max_per_root trees per root are made, each from as many rounds as it keeps trees, and the one
// with the fewest trees within 2% of the best is kept (fewer, larger messages; fewer connections
// on each link); where none is within 2% of the bound, also `rounds` rounds pruned to each root's
// heaviest trees. Within 0-2% of the bound on most shared/topologies servers at 1-8 nodes and at
// 64 H100 (PERFORMANCE.md, "Packed trees at scale").
#pragma once
#include <string>
#include <vector>

#include "topology/netgraph.h"
#include "topology/trees.h"

namespace weft::topo {

struct CutBound {
  double us_per_byte = 0;       // all-gather time per byte of one rank's shard that no schedule beats
  std::vector<int> ranks_inside;  // the worst cut found: its ranks
  double gbs_leaving = 0;       // and the bandwidth leaving it
  bool exact = false;           // max-flow over every cut (else the cuts around ranks and nodes)
};

// Ranks up to which the bound is exact and trees are packed (above: the cuts around single ranks,
// single nodes and all but one node; no packing).
inline constexpr int kForestExactRanks = 64;

CutBound allgather_cut_bound(const NetGraph& g);

struct Packing {
  std::vector<WeightedTree> trees;  // grouped by root, roots ascending; each root's shares sum to 1
  double us_per_byte = 0;           // the all-gather's time per shard byte over these trees (busiest link)
  // The same with the connections sharing the links (forest_shared_us_per_byte): all-gather (or
  // reduce-scatter), and both at once (all-reduce).
  double shared_us_per_byte = 0, shared_both_us_per_byte = 0;
  CutBound bound;
};

struct PackOptions {
  int rounds = 48;        // trees added per root before pruning, in the fallback packing
  int max_per_root = 6;   // trees kept per root (at most)
};

// Packs trees over g's ranks (at most kForestExactRanks). Deterministic: the same graph gives the
// same trees, on every rank.
Packing pack_spanning_trees(const NetGraph& g, const PackOptions& o = {});
// The same, cached by the graph's edges (the planner asks once per collective and size).
const Packing& packed_trees(const NetGraph& g);

// Time per shard byte of a forest over g: all-gather (down the trees), reduce-scatter (up), or
// both at once (an all-reduce whose phases overlap slice by slice).
double forest_us_per_byte(const NetGraph& g, const std::vector<WeightedTree>& trees, bool up, bool down);

// Time per shard byte of a forest over g when its connections share the links as the network
// shares them: every (sender, receiver) pair the trees use is one connection carrying the bytes
// of all its tree edges; the connections on a link get max-min fair shares of it (in proportion to
// their bytes where g's fabric queues are FIFO, fabric.queues "fifo"), and whoever finishes hands
// its share on. A link whose connections are held back at their other end idles, which the
// busiest link's bytes (forest_us_per_byte) cannot see: at 64 H100 (8 per node, a NIC each) the
// NICs finish 1300-1540 us into an all-reduce whose bytes take 1174 us on each.
double forest_shared_us_per_byte(const NetGraph& g, const std::vector<WeightedTree>& trees, bool up, bool down);

// Without a network: for every root, two chains over `order` (ranks in node order) from it, one
// each way, half the shard each: bandwidth-optimal on a ring or one switch.
std::vector<WeightedTree> chain_forest(const std::vector<int>& order);

// Checks a forest over n ranks: every tree spans the n ranks (tree_from_parents), shares are
// non-negative and every rank roots trees whose shares sum to more than 0. kInvalidArgument naming
// the tree otherwise.
void check_forest(const std::vector<WeightedTree>& trees, int n);

}  // namespace weft::topo
