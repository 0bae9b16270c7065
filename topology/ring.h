// Ring search: a Hamiltonian cycle of minimum total edge weight. Exact (Held-Karp dynamic
// programming) up to kExactRingLimit vertices; above, nearest-neighbour starts refined by 2-opt
// and or-opt moves.
#pragma once
#include <vector>

#include "topology/model.h"

namespace weft::topo {

inline constexpr int kExactRingLimit = 14;

struct RingResult {
  std::vector<int> order;  // starts with vertex 0
  double cost = 0;
  bool exact = false;
};

// Edge weight of a path for ring building: crossing fewer slow boundaries dominates
// (SYS >> NODE >> PHB >> PXB >> PIX >> NV); among NVLink edges more links weigh less.
double ring_edge_weight(const Path& p);

// Total weight of the cycle order[0] -> ... -> order[n-1] -> order[0].
double ring_cost(const std::vector<std::vector<double>>& w, const std::vector<int>& order);
// Best cycle for a symmetric weight matrix.
RingResult best_ring(const std::vector<std::vector<double>>& w);
// Every permutation (n <= 10); for tests.
RingResult exhaustive_ring(const std::vector<std::vector<double>>& w);
// The heuristic alone (used above kExactRingLimit); exposed for tests.
RingResult heuristic_ring(const std::vector<std::vector<double>>& w);

}  // namespace weft::topo
