// The node topology model shared by every reader (live hwloc, hwloc XML, NCCL XML): NUMA nodes,
// a PCI tree, GPUs, NICs and the GPU fabric (NVLink or XGMI). Path classes between devices are
// computed from this model only (topology/paths.h), so every source is classified the same way.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::topo {

// nvidia-smi style path classes, best first. kSelf is the diagonal ("X").
enum class PathClass : uint8_t { kSelf = 0, kNV = 1, kPIX = 2, kPXB = 3, kPHB = 4, kNODE = 5, kSYS = 6 };
const char* path_class_name(PathClass c);  // "X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS"
std::optional<PathClass> parse_path_class(std::string_view name);

// The GPU-to-GPU fabric a node has, if any.
enum class Fabric : uint8_t { kNone = 0, kNVLink = 1, kXGMI = 2 };
const char* fabric_name(Fabric f);

// One classified path between two devices.
struct Path {
  PathClass cls = PathClass::kSYS;
  Fabric fabric = Fabric::kNone;  // set when cls == kNV
  int links = 0;                  // NVLink / XGMI link count when cls == kNV
  double gbs = 0;                 // bottleneck bandwidth in GB/s (0: unknown)
  // "NV12", "XGMI3", "PIX", ...
  std::string label() const;
  bool operator==(const Path&) const = default;
};

enum class PciKind : uint8_t {
  kCpu = 0,         // a CPU-side root (hwloc: the first non-I/O ancestor; NCCL: a <cpu>)
  kHostBridge = 1,  // a PCIe host bridge / root complex
  kBridge = 2,      // a PCI-to-PCI bridge (switch port, root port, NCCL switch)
  kDevice = 3,      // a PCI function
};

struct PciNode {
  PciKind kind = PciKind::kDevice;
  int parent = -1;         // index into NodeTopology::pci, -1 for kCpu roots
  std::string busid;       // "0000:19:00.0"; empty for kCpu and synthetic host bridges
  uint16_t class_id = 0;   // PCI base class + subclass, e.g. 0x0302; 0 when unknown
  uint16_t vendor = 0;
  uint16_t device = 0;
  double link_gbs = 0;     // PCIe link bandwidth towards the parent (GB/s), 0 when unknown
  std::vector<int> numas;  // kCpu only: indices into NodeTopology::numas under this root
  std::string cpuset;      // kCpu only: CPU list ("0-27,56-83")
};

struct NumaNode {
  int os_index = 0;
  int package = -1;    // package (socket) logical index, -1 when unknown
  std::string cpuset;  // CPU list
};

enum class GpuVendor : uint8_t { kUnknown = 0, kNvidia = 1, kAmd = 2 };

struct Gpu {
  std::string pci;      // bus id of the PCI function
  std::string os_name;  // "nvml0", "rsmi3", "cuda0", "card1" or "" (PCI-only)
  GpuVendor vendor = GpuVendor::kUnknown;
  int node = -1;        // PciNode index of the function
  int partition = 0;    // index among the logical GPUs on the same PCI function
  int numa = -1;        // index into NodeTopology::numas, -1 when unknown
};

struct Nic {
  std::string name;  // OS name ("mlx5_0", "hsi0") or, without one, the bus id
  std::string pci;   // bus id, empty for a NIC attached to a CPU without PCI location
  int node = -1;     // PciNode index (a device, or the synthetic host bridge of a CPU)
  int numa = -1;     // index into NodeTopology::numas
  double gbs = 0;    // port speed in GB/s (0: unknown)
};

struct NodeTopology {
  std::string source;  // "live", a file path or "<buffer>"
  std::string format;  // "live", "hwloc", "nccl"
  std::string hostname;
  std::vector<NumaNode> numas;
  std::vector<PciNode> pci;
  std::vector<Gpu> gpus;  // in PCI bus order after finalize()
  std::vector<Nic> nics;  // in PCI bus order after finalize()
  Fabric fabric = Fabric::kNone;
  bool gpu_switch = false;  // the fabric goes through switches (NVSwitch): a GPU's links are one port to all peers
  std::vector<std::vector<int>> gpu_links;       // [i][j]: NVLink/XGMI link count, 0: none
  std::vector<std::vector<double>> gpu_link_gbs;  // [i][j]: fabric bandwidth GB/s
  std::vector<std::string> notes;                 // what the reader noticed (for --verbose)
};

// Sorts GPUs and NICs into PCI bus order (GPU link matrices follow), fills device NUMA indices,
// sizes the link matrices and checks the PCI tree (parents in range, no cycles). Readers call it.
void finalize(NodeTopology& topo);

// Walks from a PCI node up to its kCpu root; returns -1 when there is none.
int root_of(const NodeTopology& topo, int node);

// Parses "8 GT/s", "16.0 GT/s PCIe", "32 GT/s PCIe/s" into GT/s (0 when unparsable).
double parse_gts(std::string_view text);
// PCIe bandwidth (GB/s, one direction) of a link from its transfer rate and lane count.
double pcie_gbs(double gts, int width);
// Lower-case "dddd:bb:dd.f"; an empty optional when text is not a PCI bus id.
std::optional<std::string> normalize_busid(std::string_view text);

}  // namespace weft::topo
