// Human-readable output for weft-topo: an `nvidia-smi topo -m` style matrix.
#pragma once
#include <string>

#include "topology/summary.h"

namespace weft::topo {

// GPUs and NICs as rows and columns (tab separated), CPU and NUMA affinity columns, the NUMA nodes,
// the rail (NIC per GPU), the ring and the legend. A node without GPUs says so.
std::string format_matrix(const NodeSummary& s);

}  // namespace weft::topo
