// The little of this node's topology that weftrun needs to bind ranks: NUMA nodes with their CPUs,
// GPUs and RDMA NICs with the NUMA node they hang off. Deliberately minimal and isolated behind
// probe_node_topology() so that it can later be replaced by the full topology/ layer.
#pragma once
#include <string>
#include <vector>

namespace weft::launcher {

struct NumaNode {
  int os_index = 0;
  std::vector<int> cpus;  // OS CPU numbers
};

struct PciDevice {
  std::string name;      // GPU: PCI bus id "0000:17:00.0"; NIC: "mlx5_0"
  std::string bus_id;    // PCI bus id
  int numa = -1;         // index into NodeTopology::numa (not the OS index); -1: unknown
  std::vector<int> cpus; // CPUs local to the device (its nearest non-I/O ancestor)
  int pci_domain = 0, pci_bus = 0;  // for nearness between devices (same domain/bus root)
  std::string path;      // chain of PCI bridges from the host bridge, for nearness
};

struct NodeTopology {
  std::vector<NumaNode> numa;
  std::vector<PciDevice> gpus;  // NVIDIA GPUs in PCI bus order (= CUDA_DEVICE_ORDER=PCI_BUS_ID)
  std::vector<PciDevice> nics;  // OpenFabrics (RDMA) devices
  int cores = 0;                // physical cores
};

// Asks hwloc. Never throws: on failure returns one NUMA node with every online CPU.
NodeTopology probe_node_topology();

// How many PCI bridge hops two devices share from the root (higher = nearer).
int pci_affinity(const PciDevice& a, const PciDevice& b);

}  // namespace weft::launcher
