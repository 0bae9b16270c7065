// Internal helpers shared by the topology readers (not part of the public API).
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <pugixml.hpp>

#include "topology/model.h"

namespace weft::topo::detail {

// Parses xml into doc; throws weft::Error naming source for malformed XML, oversize input or
// nesting deeper than kMaxXmlDepth.
void parse_xml_checked(pugi::xml_document& doc, std::string_view xml, const std::string& source);

// Collects GPU fabric links (direct or through switches) and writes NodeTopology's matrices.
class FabricBuilder {
 public:
  explicit FabricBuilder(size_t gpus) : direct_links_(gpus, std::vector<int>(gpus, 0)),
                                        direct_gbs_(gpus, std::vector<double>(gpus, 0.0)) {}
  void add_direct(int a, int b, int links, double gbs);
  void add_switch_link(int gpu, int sw, int links, double gbs);
  void join_switches(int s1, int s2);
  bool empty() const { return !any_; }
  // Fills topo.gpu_links / gpu_link_gbs (in the current GPU order) and topo.fabric.
  void apply(NodeTopology& topo, Fabric fabric);

 private:
  int find(int sw);
  std::vector<std::vector<int>> direct_links_;
  std::vector<std::vector<double>> direct_gbs_;
  struct SwitchLink { int gpu, sw, links; double gbs; };
  std::vector<SwitchLink> switch_links_;
  std::map<int, int> parent_;
  bool any_ = false;
};

// Per-link bandwidth in GB/s used when a source gives only link counts.
inline constexpr double kNvlinkGbsPerLink = 25.0;
inline constexpr double kNvlink1GbsPerLink = 20.0;
inline constexpr double kXgmiGbsPerLink = 50.0;

bool is_gpu_class(uint16_t class_id);  // 0x03xx display or 0x12xx processing accelerator
GpuVendor gpu_vendor(uint16_t vendor);  // 0x10de NVIDIA, 0x1002 AMD

}  // namespace weft::topo::detail
