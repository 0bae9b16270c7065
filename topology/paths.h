// Path classification (nvidia-smi topo -m semantics) and the nearest-NIC (rail) choice.
//
// Rules, applied to the model's PCI tree (see docs/TOPOLOGY.md):
//   NV#   the two GPUs share NVLink/XGMI links (directly or through NVSwitches), # = link count
//   PIX   the lowest common ancestor is a PCI bridge/switch and each device is at most one bridge
//         below it (one PCIe switch: upstream port plus a downstream port per side)
//   PXB   the lowest common ancestor is a PCI bridge, with more bridges in between (several switches)
//   PHB   the lowest common ancestor is a host bridge (root complex)
//   NODE  different host bridges under the same CPU-side object or overlapping NUMA nodes
//   SYS   different NUMA nodes (crossing the SMP interconnect)
#pragma once
#include <vector>

#include "topology/model.h"

namespace weft::topo {

// Path between two PCI nodes of topo.
Path pci_path(const NodeTopology& topo, int node_a, int node_b);
Path gpu_gpu_path(const NodeTopology& topo, int a, int b);
Path gpu_nic_path(const NodeTopology& topo, int gpu, int nic);
Path nic_nic_path(const NodeTopology& topo, int a, int b);

// Matrix over devices: GPUs first (0..G-1), then NICs (G..G+N-1).
std::vector<std::vector<Path>> path_matrix(const NodeTopology& topo);

// Lower is better: kSelf < kNV < kPIX < ... < kSYS.
inline int class_rank(PathClass c) { return static_cast<int>(c); }

// One NIC per item (a GPU, or a CPU-only rank on a NUMA node): the nearest NIC by path class
// (PIX < PXB < PHB < NODE < SYS), then the least loaded, then the fastest, then the lowest index.
// classes[i][k] is item i's path class to NIC k; nic_gbs[k] its speed. Items whose best class is
// better are placed first, so a GPU with a local NIC is never displaced by one without.
// Returns the NIC index per item (-1 when there are no NICs).
std::vector<int> assign_nearest_nics(const std::vector<std::vector<PathClass>>& classes,
                                     const std::vector<double>& nic_gbs);

}  // namespace weft::topo
