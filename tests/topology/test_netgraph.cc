// The job's network as a graph (topology/netgraph.h): routes through NICs, leaves and the spine,
// rail-optimised leaves, meshes of direct node links; the fabric's JSON and its errors; what-if
// nodes (topology/whatif.h).
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "runtime/base/error.h"
#include "topo_test_util.h"
#include "topology/forest.h"
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
  expect_error([&] { m.apply_json(nlohmann::json::parse(R"({"fabric": {"queues": "lifo"}})")); },
               "fabric.queues must be \"fair\" or \"fifo\"");
  EXPECT_FALSE(m.fabric.fifo_queues);
  m.apply_json(nlohmann::json::parse(R"({"fabric": {"queues": "fifo"}})"));  // keeps the links
  EXPECT_TRUE(m.fabric.fifo_queues);
  // to_json reads back the same fabric.
  CostModel back = CostModel::defaults();
  back.apply_json(m.to_json());
  EXPECT_EQ(back.fabric.links, m.fabric.links);
  EXPECT_TRUE(back.fabric.fifo_queues);
  // A fabric of FIFO queues alone (one switch) survives the round trip too.
  CostModel fifo = CostModel::defaults(), fifo_back = CostModel::defaults();
  fifo.apply_json(nlohmann::json::parse(R"({"fabric": {"queues": "fifo"}})"));
  fifo_back.apply_json(fifo.to_json());
  EXPECT_TRUE(fifo_back.fabric.fifo_queues);
  EXPECT_FALSE(fifo_back.fabric.active());
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

// ---- Packed spanning trees (topology/forest.h) -------------------------------------------------

namespace {

// The all-gather bound by brute force: every set of vertices holding some but not all ranks.
double brute_bound(const NetGraph& g) {
  const int V = g.vertices(), n = g.ranks();
  double best = 0;
  for (uint32_t s = 1; s < (1u << V); ++s) {
    int inside = 0;
    for (int r = 0; r < n; ++r) inside += (s >> r) & 1;
    if (inside == 0 || inside == n) continue;
    double out = 0;
    for (const NetEdge& e : g.edges())
      if (((s >> e.from) & 1) && !((s >> e.to) & 1)) out += e.gbs;
    best = std::max(best, inside / (out * 1e3));
  }
  return best;
}

CostModel mesh_model(const std::string& links) {
  CostModel m = CostModel::defaults();
  m.apply_json(nlohmann::json{{"fabric", {{"links", links}}}});
  return m;
}

NodeSummary cpu_summary() {
  NodeSummary s;
  s.numa_nodes.push_back({0, 0, ""});
  return s;
}

}  // namespace

TEST(PackedTrees, CutBoundIsTheWorstCut) {
  struct Case {
    ClusterView view;
    CostModel model;
  };
  std::vector<Case> cases;
  const CostModel issue = mesh_model("0-1:1gbit,1-2:1gbit,2-3:1gbit,3-0:1gbit,0-2:250mbit");
  cases.push_back({make_uniform_cluster(cpu_summary(), 4, 1), issue});
  cases.push_back({make_uniform_cluster(cpu_summary(), 4, 2), issue});  // two ranks per node: a hub each
  cases.push_back({make_uniform_cluster(cpu_summary(), 3, 1), mesh_model("0-1:1gbit,1-2:100mbit")});  // a line
  cases.push_back({make_uniform_cluster(gpu_node(2, 1), 3, 2), CostModel::defaults()});           // one switch
  for (const Case& c : cases) {
    const NetGraph g(c.view, c.model);
    ASSERT_LE(g.vertices(), 20);
    const CutBound b = allgather_cut_bound(g);
    EXPECT_TRUE(b.exact);
    EXPECT_NEAR(b.us_per_byte, brute_bound(g), 1e-6 * b.us_per_byte) << g.ranks() << " ranks";
  }
  // The issue's mesh: the three other nodes must send node 1 (or 3) 3 shards over its 2 links of
  // 1 Gbit/s; the 250 Mbit/s link does not help either.
  const CutBound b = allgather_cut_bound(NetGraph(cases[0].view, cases[0].model));
  EXPECT_NEAR(b.us_per_byte, 3 / (0.25 * 1e3), 1e-6 * b.us_per_byte);
  EXPECT_TRUE(b.ranks_inside == (std::vector<int>{0, 2, 3}) || b.ranks_inside == (std::vector<int>{0, 1, 2}))
      << fmt::format("{}", fmt::join(b.ranks_inside, ","));
  EXPECT_NEAR(b.gbs_leaving, 0.25, 1e-9);
}

TEST(PackedTrees, PackingComesCloseToTheBound) {
  struct Case {
    std::string what;
    ClusterView view;
    CostModel model;
    double within;
  };
  std::vector<Case> cases;
  cases.push_back({"ring 5x1", make_uniform_cluster(cpu_summary(), 5, 1),
                   mesh_model("0-1:1gbit,1-2:1gbit,2-3:1gbit,3-4:1gbit,4-0:1gbit"), 1.02});
  cases.push_back({"full mesh 4x1", make_uniform_cluster(cpu_summary(), 4, 1),
                   mesh_model("0-1:1gbit,1-2:1gbit,2-3:1gbit,3-0:1gbit,0-2:1gbit,1-3:1gbit"), 1.02});
  cases.push_back({"issue mesh 4x1", make_uniform_cluster(cpu_summary(), 4, 1),
                   mesh_model("0-1:1gbit,1-2:1gbit,2-3:1gbit,3-0:1gbit,0-2:250mbit"), 1.05});
  cases.push_back({"full mesh 4x1, one slow link", make_uniform_cluster(cpu_summary(), 4, 1),
                   mesh_model("0-1:1gbit,1-2:1gbit,2-3:1gbit,3-0:250mbit,0-2:1gbit,1-3:1gbit"), 1.05});
  cases.push_back({"MI250X-like fixture", make_uniform_cluster(load_summary(fixture("amd-xgmi-4gcd-slingshot-hwloc2.xml")), 1, 4),
                   CostModel::defaults(), 1.05});
  cases.push_back({"2 switched nodes of 4", make_uniform_cluster(gpu_node(4, 2), 2, 4), CostModel::defaults(), 1.10});
  // Several nodes, a NIC per GPU: every round's tree differs, and until 7 Dec keeping each root's
  // first few of 48 left the packing 2-4.5x the bound here (at 64 H100, 8 per node: 2.34x).
  cases.push_back({"4 switched nodes of 8, a NIC per GPU", make_uniform_cluster(gpu_node(8, 8), 4, 8), CostModel::defaults(), 1.03});
  for (const Case& c : cases) {
    const NetGraph g(c.view, c.model);
    const Packing p = pack_spanning_trees(g);
    check_forest(p.trees, g.ranks());
    EXPECT_NEAR(p.us_per_byte, forest_us_per_byte(g, p.trees, false, true), 1e-12);
    EXPECT_GE(p.us_per_byte, p.bound.us_per_byte * (1 - 1e-6)) << c.what;  // nothing beats the bound
    EXPECT_LE(p.us_per_byte, p.bound.us_per_byte * c.within) << c.what << ": " << p.us_per_byte / p.bound.us_per_byte;
    std::vector<int> per_root(g.ranks(), 0);
    for (const auto& t : p.trees) per_root[t.tree.root]++;
    for (int k : per_root) EXPECT_TRUE(k >= 1 && k <= PackOptions{}.max_per_root) << c.what;
    // Deterministic: the same graph packs the same trees.
    const Packing again = pack_spanning_trees(g);
    ASSERT_EQ(again.trees.size(), p.trees.size());
    for (size_t i = 0; i < p.trees.size(); ++i) EXPECT_EQ(again.trees[i].tree.parent, p.trees[i].tree.parent);
  }
  // The connections sharing the links: never faster than the busiest link's bytes; on 8 nodes of
  // 8 GPUs with a NIC each, slower (the NICs' connections are held back at their other ends),
  // which is what the event level plays (test_event_sim); on one switch with chains, the same.
  {
    const ClusterView v = make_uniform_cluster(gpu_node(8, 8), 8, 8);
    const CostModel m = CostModel::defaults();
    const NetGraph g(v, m);
    const Packing& p = packed_trees(g);
    EXPECT_LE(p.us_per_byte, p.bound.us_per_byte * 1.03);
    const double busiest_both = forest_us_per_byte(g, p.trees, true, true);
    EXPECT_NEAR(p.shared_both_us_per_byte, forest_shared_us_per_byte(g, p.trees, true, true), 1e-12);
    EXPECT_NEAR(p.shared_us_per_byte, forest_shared_us_per_byte(g, p.trees, false, true), 1e-12);
    EXPECT_GE(p.shared_us_per_byte, p.us_per_byte * (1 - 1e-9));
    EXPECT_GT(p.shared_both_us_per_byte, 1.2 * busiest_both);
    const ClusterView one = make_uniform_cluster(gpu_node(8, 1), 1, 8);
    const NetGraph sw(one, m);
    std::vector<int> order(8);
    for (int i = 0; i < 8; ++i) order[i] = i;
    const auto chains8 = chain_forest(order);
    EXPECT_NEAR(forest_shared_us_per_byte(sw, chains8, true, true), forest_us_per_byte(sw, chains8, true, true),
                1e-9 * forest_us_per_byte(sw, chains8, true, true));
  }
  // Chains both ways reach the bound on a ring of equal links; one way only half of it.
  const ClusterView four = make_uniform_cluster(cpu_summary(), 4, 1);  // a NetGraph keeps references to both
  const CostModel ring_links = mesh_model("0-1:1gbit,1-2:1gbit,2-3:1gbit,3-0:1gbit");
  const NetGraph ring(four, ring_links);
  const auto chains = chain_forest({0, 1, 2, 3});
  EXPECT_NEAR(forest_us_per_byte(ring, chains, false, true), allgather_cut_bound(ring).us_per_byte, 1e-6 * 0.012);
}
