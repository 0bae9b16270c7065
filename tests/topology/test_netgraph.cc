// The job's network as a graph (topology/netgraph.h): routes through NICs, leaves and the spine,
// rail-optimised leaves, meshes of direct node links; the fabric's JSON and its errors; what-if
// nodes (topology/whatif.h).
#include <gtest/gtest.h>

#include "runtime/base/error.h"
#include "topo_test_util.h"
#include "topology/netgraph.h"
#include "topology/whatif.h"

using namespace weft;
using namespace weft::topo;
using namespace weft::topo::testing;

namespace {

// The names of the vertices a message from a to b passes, after a.
std::vector<std::string> hops(const NetGraph& g, int a, int b) {
  std::vector<std::string> out;
  for (int e : g.route(a, b)) out.push_back(g.vertex_name(g.edges()[e].to));
  return out;
}

NodeSummary gpu_node(int gpus, int nics) {
  NodeSummary s = switched_node(gpus, 450);
  set_nics(s, nics, 50);
  return s;
}

template <typename F>
void expect_error(F f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no error; wanted one naming '" << what << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(NetGraph, RoutesInsideNodesAndThroughOneSwitch) {
  const ClusterView v = make_uniform_cluster(gpu_node(4, 2), 2, 4);
  const NetGraph g(v, CostModel::defaults());
  // GPUs on one NVSwitch: through its port; another node: NIC, switch, NIC.
  EXPECT_EQ(hops(g, 0, 1), (std::vector<std::string>{"node 0 NVSwitch", "rank 1"}));
  EXPECT_EQ(hops(g, 1, 6), (std::vector<std::string>{"node 0 NIC net0", "switch", "node 1 NIC net1", "rank 6"}));
  // Ranks 2 and 3 share NIC net1 of node 0: one NIC vertex, one edge each way to the switch.
  EXPECT_EQ(g.route(2, 5)[1], g.route(3, 5)[1]);
  for (int e : g.route(1, 6))
    if (g.vertex_name(g.edges()[e].to) == "switch") {
      EXPECT_DOUBLE_EQ(g.edges()[e].gbs, 50);
    }
  EXPECT_TRUE(g.route(3, 3).empty());
  EXPECT_DOUBLE_EQ(g.alpha_us(0, 5), CostModel::defaults().net.alpha_us);
}

TEST(NetGraph, LeavesSpineAndRails) {
  CostModel m = CostModel::defaults();
  m.apply_json(nlohmann::json::parse(R"({"fabric": {"leaf_nodes": 2, "oversubscription": 4}})"));
  m.classes[static_cast<int>(PathClass::kPIX)].gbs = 50;  // the GPU's way to its NIC no slower than the NIC
  const ClusterView v = make_uniform_cluster(gpu_node(2, 2), 4, 2);  // nodes 0, 1 on leaf 0; 2, 3 on leaf 1
  const NetGraph g(v, m);
  EXPECT_EQ(hops(g, 0, 2), (std::vector<std::string>{"node 0 NIC net0", "leaf 0", "node 1 NIC net0", "rank 2"}));
  EXPECT_EQ(hops(g, 0, 4),
            (std::vector<std::string>{"node 0 NIC net0", "leaf 0", "spine", "leaf 1", "node 2 NIC net0", "rank 4"}));
  // A leaf's uplink: its 4 NICs of 50 GB/s over 4.
  EXPECT_DOUBLE_EQ(g.edges()[g.route(0, 4)[2]].gbs, 50.0);
  // Rail-optimised: NIC k of every node of a group on leaf k; the other NIC is another leaf.
  m.fabric.rail_optimized = true;
  const NetGraph r(v, m);
  EXPECT_EQ(hops(r, 0, 2), (std::vector<std::string>{"node 0 NIC net0", "leaf 0", "node 1 NIC net0", "rank 2"}));
  EXPECT_EQ(hops(r, 0, 3),
            (std::vector<std::string>{"node 0 NIC net0", "leaf 0", "spine", "leaf 1", "node 1 NIC net1", "rank 3"}));
  // Oversubscription slows flows that cross the spine together, not those that stay on a leaf.
  std::vector<Flow> across, within;
  for (int n = 0; n < 2; ++n)
    for (int l = 0; l < 2; ++l) across.push_back({n * 2 + l, 4 + n * 2 + l, 1e6}), within.push_back({n * 2 + l, (1 - n) * 2 + l, 1e6});
  EXPECT_NEAR(flows_time_us(g, across), 4 * 1e6 / (50 * 1e3), 1e-6);  // 4 flows through one 50 GB/s uplink
  EXPECT_NEAR(flows_time_us(g, within), 1e6 / (50 * 1e3), 1e-6);
}

TEST(NetGraph, MeshRoutesOverTheFewestThenWidestLinks) {
  CostModel m = CostModel::defaults();
  m.apply_json(nlohmann::json::parse(
      R"({"net": {"alpha_us": 10}, "fabric": {"links": "0-1:1gbit,1-2:1gbit,2-3:1gbit,3-0:250mbit,0-2:100mbit"}})"));
  NodeSummary cpu;
  cpu.numa_nodes.push_back({0, 0, ""});
  const ClusterView v = make_uniform_cluster(cpu, 4, 1);
  const NetGraph g(v, m);
  EXPECT_EQ(hops(g, 0, 1), (std::vector<std::string>{"node 0 router", "node 1 router", "rank 1"}));
  EXPECT_EQ(hops(g, 0, 2), (std::vector<std::string>{"node 0 router", "node 2 router", "rank 2"}));  // one link, slow
  // 1 -> 3: two links either way; 1-2-3 is wider than 1-0-3.
  EXPECT_EQ(hops(g, 1, 3), (std::vector<std::string>{"node 1 router", "node 2 router", "node 3 router", "rank 3"}));
  EXPECT_DOUBLE_EQ(g.alpha_us(1, 3), 20);
  EXPECT_NEAR(flows_time_us(g, {{0, 2, 1e6}}), 1e6 / (0.0125 * 1e3), 1e-6);
  // A node the links do not reach is named.
  m.fabric.links = parse_node_links("0-1:1gbit,1-2:1gbit");
  expect_error([&] { NetGraph bad(v, m); }, "node 0 has no links that reach node 3");
}

TEST(NetGraph, FabricJsonRatesAndLinksAreChecked) {
  EXPECT_DOUBLE_EQ(parse_rate_gbs("400gbit"), 50);
  EXPECT_DOUBLE_EQ(parse_rate_gbs("250mbit"), 0.03125);
  EXPECT_DOUBLE_EQ(parse_rate_gbs("12.5GB/s"), 12.5);
  EXPECT_DOUBLE_EQ(parse_rate_gbs("25"), 25);
  expect_error([] { parse_rate_gbs("fast"); }, "bad rate 'fast'");
  expect_error([] { parse_rate_gbs("10furlongs"); }, "bad rate unit");
  expect_error([] { parse_rate_gbs("0gbit"); }, "bad rate");
  const auto links = parse_node_links("0-1:1gbit,2-0:250mbit");
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[1].a, 2);
  EXPECT_DOUBLE_EQ(links[1].gbs, 0.03125);
  expect_error([] { parse_node_links("0-1"); }, "bad entry '0-1'");
  expect_error([] { parse_node_links("1-1:1gbit"); }, "joins node 1 to itself");
  expect_error([] { parse_node_links("0-1:1gbit,1-0:1gbit"); }, "joined twice");
  expect_error([] { parse_node_links("0-1:1gbit,,1-2:1gbit"); }, "an empty entry");
  CostModel m = CostModel::defaults();
  expect_error([&] { m.apply_json(nlohmann::json::parse(R"({"fabric": {"leafs": 4}})")); }, "unknown fabric key 'leafs'");
  expect_error([&] { m.apply_json(nlohmann::json::parse(R"({"fabric": {"oversubscription": 0.5}})")); }, ">= 1");
  expect_error([&] { m.apply_json(nlohmann::json::parse(R"({"fabric": {"links": [{"nodes": [0, 1]}]}})")); },
               "needs \"nodes\": [a, b] and \"gbs\"");
  m.apply_json(nlohmann::json::parse(R"({"fabric": {"links": [{"nodes": [0, 1], "gbs": 0.1, "alpha_us": 7}]}})"));
  ASSERT_EQ(m.fabric.links.size(), 1u);
  EXPECT_DOUBLE_EQ(m.fabric.links[0].alpha_us, 7);
  // to_json reads back the same fabric.
  CostModel back = CostModel::defaults();
  back.apply_json(m.to_json());
  EXPECT_EQ(back.fabric.links, m.fabric.links);
}

TEST(WhatIf, NodesWithSwitchesAndNics) {
  NodeSummary s = load_summary(fixture("pcie-2socket-8gpu-switches-hwloc2.xml"));
  EXPECT_FALSE(s.gpu_switch);
  set_gpu_switch(s, 300);
  EXPECT_TRUE(s.gpu_switch);
  EXPECT_EQ(s.gpu_gpu(0, 7).label(), "NV12");
  set_nics(s, 4, 50);
  ASSERT_EQ(s.num_nics(), 4);
  EXPECT_EQ(s.nic_for_gpu, (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(s.gpu_nic(2, 1).label(), "PIX");
  EXPECT_EQ(s.gpu_nic(2, 0).label(), "SYS");
  // The summary survives its JSON, switch included.
  EXPECT_EQ(summary_from_json(to_json(s)), s);
  // The DGX-like fixture's NVSwitches are read as a switch.
  EXPECT_TRUE(load_summary(fixture("dgx-a100-like-8gpu-nvswitch-8nic-nccl.xml")).gpu_switch);
}
