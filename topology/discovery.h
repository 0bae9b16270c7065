// Where a NodeTopology comes from: the live machine (hwloc with I/O discovery), an hwloc XML file
// (v1 or v2 format) or an NCCL topology XML file (NCCL_TOPO_FILE format). Every reader throws
// weft::Error (kInvalidArgument for bad input, kSystemError for I/O) and never crashes on hostile
// input. A file without GPUs is a CPU-only view, not an error.
#pragma once
#include <string>
#include <string_view>

#include "topology/model.h"

namespace weft::topo {

enum class TopoFormat : uint8_t { kHwloc = 0, kNccl = 1 };

// Discovers this machine with hwloc (I/O objects included).
NodeTopology discover_live();

// Reads hwloc XML (root <topology>) from memory.
NodeTopology read_hwloc_xml(std::string_view xml, const std::string& source = "<buffer>");
// Reads NCCL topology XML (root <system>) from memory.
NodeTopology read_nccl_xml(std::string_view xml, const std::string& source = "<buffer>");
// Detects the format from the root element: <topology> = hwloc, <system> = NCCL.
TopoFormat detect_format(std::string_view xml, const std::string& source = "<buffer>");
// Detects the format and reads.
NodeTopology read_topology_xml(std::string_view xml, const std::string& source = "<buffer>");
// Reads a file (format detected from the content).
NodeTopology load_topology_file(const std::string& path);
// The file named by WEFT_TOPO_FILE when set, else the live machine.
NodeTopology load_topology();

// Input limits: files larger than this are rejected before parsing.
inline constexpr size_t kMaxTopologyFileBytes = 64u << 20;
// XML nesting deeper than this is rejected (real files nest < 30 levels).
inline constexpr int kMaxXmlDepth = 256;

}  // namespace weft::topo
