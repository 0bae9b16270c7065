#pragma once
#include <string>

#include "topology/topology.h"

namespace weft::topo::testing {

inline std::string fixture(const std::string& name) { return std::string(WEFT_TOPO_FIXTURES) + "/" + name; }

inline NodeSummary load_summary(const std::string& path) { return summarize(load_topology_file(path)); }

inline std::string cls(const NodeSummary& s, const std::string& a, const std::string& b) {
  auto idx = [&](const std::string& id) {
    for (int d = 0; d < s.num_devices(); ++d)
      if (s.device_id(d) == id) return d;
    return -1;
  };
  int x = idx(a), y = idx(b);
  if (x < 0 || y < 0) return "missing";
  return s.paths[x][y].label();
}

}  // namespace weft::topo::testing
