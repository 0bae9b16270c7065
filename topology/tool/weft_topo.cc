// weft-topo: prints the node topology (nvidia-smi topo -m style, or --json) and, with `plan`, the
// rings, rails, trees and predicted times Weft would use for a cluster of such nodes.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "runtime/error.h"
#include "topology/discovery.h"
#include "topology/report.h"
#include "topology/summary.h"

int main(int argc, char** argv) {
  CLI::App app{"weft-topo: node topology, path classes and communication plans"};
  std::string input;
  bool json = false;
  app.add_option("--input,-i", input, "hwloc XML (v1/v2) or NCCL topology XML file (default: this machine)");
  app.add_flag("--json", json, "machine-readable output (schema in docs/TOPOLOGY.md)");
  CLI11_PARSE(app, argc, argv);
  try {
    weft::topo::NodeTopology topo =
        input.empty() ? weft::topo::load_topology() : weft::topo::load_topology_file(input);
    weft::topo::NodeSummary s = weft::topo::summarize(topo);
    if (json) std::cout << weft::topo::report_json(s).dump(2) << "\n";
    else std::cout << weft::topo::format_matrix(s);
  } catch (const weft::Error& e) {
    std::fprintf(stderr, "weft-topo: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-topo: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
