// Ring search optimality, double binary trees, cluster view and plan ranking.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>

#include "collectives/planner.h"
#include "runtime/base/error.h"
#include "topology/forest.h"
#include "topo_test_util.h"

namespace weft::topo {
namespace {

std::vector<std::vector<double>> random_weights(int n, std::mt19937& rng) {
  const PathClass classes[] = {PathClass::kNV, PathClass::kPIX, PathClass::kPXB, PathClass::kPHB, PathClass::kNODE,
                               PathClass::kSYS};
  std::uniform_int_distribution<int> pick(0, 5), links(1, 18);
  std::vector<std::vector<double>> w(n, std::vector<double>(n, 0));
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) {
      Path p{classes[pick(rng)], Fabric::kNVLink, links(rng), 0};
      w[a][b] = w[b][a] = ring_edge_weight(p);
    }
  return w;
}

TEST(TopoRing, ExactMatchesExhaustiveUpTo8) {
  std::mt19937 rng(42);
  for (int n = 1; n <= 8; ++n)
    for (int trial = 0; trial < 40; ++trial) {
      auto w = random_weights(n, rng);
      auto best = best_ring(w);
      ASSERT_EQ(static_cast<int>(best.order.size()), n);
      EXPECT_DOUBLE_EQ(best.cost, exhaustive_ring(w).cost) << "n=" << n << " trial=" << trial;
      EXPECT_DOUBLE_EQ(best.cost, ring_cost(w, best.order));
    }
}

TEST(TopoRing, HeuristicIsCloseToExact) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 10; ++trial) {
    auto w = random_weights(12, rng);
    auto exact = best_ring(w);
    auto heur = heuristic_ring(w);
    EXPECT_TRUE(exact.exact);
    EXPECT_GE(heur.cost + 1e-6, exact.cost);
    // Same number of edges in the worst class: the heuristic never adds a slow crossing here.
    EXPECT_LE(heur.cost, exact.cost * 1.5 + 10);
  }
  auto big = random_weights(40, rng);
  auto r = best_ring(big);
  EXPECT_FALSE(r.exact);
  std::vector<int> sorted = r.order;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 40; ++i) EXPECT_EQ(sorted[i], i);
}

void check_tree(const Tree& t, int n) {
  ASSERT_EQ(static_cast<int>(t.parent.size()), n);
  int roots = 0;
  for (int v = 0; v < n; ++v) {
    roots += t.parent[v] < 0;
    EXPECT_LE(t.children[v].size(), 2u);
    int u = v, steps = 0;
    while (t.parent[u] >= 0 && steps <= n) {
      u = t.parent[u];
      ++steps;
    }
    EXPECT_EQ(u, t.root) << "vertex " << v << " does not reach the root";
  }
  EXPECT_EQ(roots, 1);
}

TEST(TopoTrees, DoubleBinaryTreeProperties) {
  for (int n = 1; n <= 70; ++n) {
    auto trees = double_binary_trees(n);
    ASSERT_EQ(trees.size(), 2u);
    check_tree(trees[0], n);
    check_tree(trees[1], n);
    for (int v = 0; v < n && n > 1; ++v) {
      const int interior = !trees[0].is_leaf(v) + !trees[1].is_leaf(v);
      EXPECT_LE(interior, 1) << "n=" << n << " v=" << v;
      EXPECT_GE(2 - interior, 1);
    }
    int depth_bound = 1;
    while ((1 << depth_bound) <= n) ++depth_bound;
    EXPECT_LE(trees[0].depth(), depth_bound + 1);
    EXPECT_LE(trees[1].depth(), depth_bound + 1);
  }
  int p, c0, c1;
  binary_tree_links(8, 4, &p, &c0, &c1);
  EXPECT_EQ(p, 0);
  EXPECT_EQ(c0, 2);
  EXPECT_EQ(c1, 6);
}

NodeSummary nvswitch_node() {
  return testing::load_summary(testing::fixture("dgx-a100-like-8gpu-nvswitch-8nic-nccl.xml"));
}

TEST(TopoCluster, BuildFromRanks) {
  NodeSummary s = nvswitch_node();
  std::vector<RankInfo> ranks;
  // Interleaved placement: even ranks on host a, odd ranks on host b.
  for (int r = 0; r < 6; ++r) ranks.push_back({r % 2 ? "b" : "a", s, Binding{r / 2, "mlx5_" + std::to_string(r / 2), 0}});
  auto v = build_cluster_view(ranks);
  EXPECT_EQ(v.size(), 6);
  EXPECT_EQ(v.num_nodes(), 2);
  EXPECT_EQ(v.node_keys, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(v.ranks_of_node[1], (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(v.local_rank[5], 2);
  EXPECT_TRUE(v.uniform());
  auto bad = ranks;
  bad[0].binding.gpu = 9;
  EXPECT_THROW(build_cluster_view(bad), Error);
  bad = ranks;
  bad[1].binding.nic = "mlx5_99";
  EXPECT_THROW(build_cluster_view(bad), Error);
  RankInfo back = decode_rank_info(encode_rank_info(ranks[3]));
  EXPECT_EQ(back.node_key, "b");
  EXPECT_EQ(back.summary, s);
  EXPECT_EQ(back.binding, ranks[3].binding);
  EXPECT_THROW(decode_rank_info(to_bytes("{not json")), Error);
}

TEST(TopoCluster, NodeKeyFromEnv) {
  NodeSummary s;
  s.hostname = "h1";
  EXPECT_EQ(local_node_key(s), "h1");
  ::setenv("WEFT_NODE_ID", "rack3-n7", 1);
  EXPECT_EQ(local_node_key(s), "rack3-n7");
  ::unsetenv("WEFT_NODE_ID");
}

TEST(TopoPlans, RankedAndExplained) {
  auto view = make_uniform_cluster(nvswitch_node(), 4, 8);
  const CostModel model = CostModel::defaults();
  auto large = rank_plans(view, CollectiveKind::kAllReduce, size_t{1} << 30, model);
  ASSERT_EQ(large.size(), 6u);  // ring, tree, rhd, hier, forest, f32acc (shown, chosen by type only)
  for (size_t i = 1; i < large.size(); ++i) EXPECT_LE(large[i - 1].predicted_us, large[i].predicted_us);
  // The rails or the packed trees (which use every NIC too); never the flat ring through one NIC.
  EXPECT_TRUE(large.front().plan.algorithm == "hier" || large.front().plan.algorithm == "forest")
      << large.front().plan.algorithm;
  for (const auto& c : large)  // only the packed trees overlap their reduce-scatter and all-gather on the links
    if (c.plan.algorithm != "forest") {
      EXPECT_GE(c.predicted_us, c.plan.ideal_us * (1 - 1e-9)) << c.plan.algorithm;
    }
  auto small = rank_plans(view, CollectiveKind::kAllReduce, 8, model);
  EXPECT_NE(small.front().plan.algorithm, "ring");  // latency-bound: log-depth wins
  const Plan& p = std::find_if(large.begin(), large.end(), [](const auto& c) { return c.plan.algorithm == "hier"; })->plan;
  ASSERT_EQ(p.rails.size(), 8u);
  for (int l = 0; l < 8; ++l)
    for (const auto& nic : p.rails[l].nics) EXPECT_EQ(nic, "mlx5_" + std::to_string(l));
  EXPECT_EQ(p.trees.size(), 2u);
  ASSERT_EQ(p.levels.size(), 2u);
  EXPECT_EQ(p.levels[0].groups.size(), 4u);
  EXPECT_EQ(p.levels[1].groups.size(), 8u);
  EXPECT_EQ(p.rings[0].size(), 32u);
  const std::string text = p.explain();
  EXPECT_NE(text.find("hierarchical"), std::string::npos);
  EXPECT_NE(text.find("rail 0"), std::string::npos);
  // Flat ring formula on one node of NVLink: a chunk of one slice (512 KiB: 4 MiB over 8 ranks)
  // pays every step's latency, 2(n-1)/n * S / bw + 2(n-1) * alpha; chunks of two slices
  // (8 MiB) pipeline the steps, and at 300 GB/s a chunk's transfer (3.5 us) outlasts a slice's
  // hop (1 us + 1.75 us), so only one hop's latency is left: 2(n-1)/n * S / bw + alpha.
  auto one = make_uniform_cluster(nvswitch_node(), 1, 8);
  int seen = 0;
  for (const auto& c : rank_plans(one, CollectiveKind::kAllReduce, 4 << 20, model))
    if (c.plan.algorithm == "ring") {
      EXPECT_NEAR(c.predicted_us, 2.0 * 7 / 8 * (4 << 20) / (300 * 1e3) + 2 * 7 * 1.0, 1e-6);
      ++seen;
    }
  for (const auto& c : rank_plans(one, CollectiveKind::kAllReduce, 8 << 20, model))
    if (c.plan.algorithm == "ring") {
      EXPECT_NEAR(c.predicted_us, 2.0 * 7 / 8 * (8 << 20) / (300 * 1e3) + 1.0, 1e-6);
      ++seen;
    }
  EXPECT_EQ(seen, 2);
}

// The automatic choice (what the communicator runs when WEFT_ALGO is unset) on a slow network
// shared by the ranks of a node: hierarchical for large all-reduces, reduce-scatters and
// all-gathers over nodes of several ranks, never for the rooted collectives (no hierarchical
// schedule: one NIC per node carries a chain's bytes once), never with one rank per node.
TEST(TopoPlans, AutomaticChoiceAndPipelinedHierarchy) {
  CostModel m = CostModel::defaults();
  m.apply_json(nlohmann::json::parse(R"({"net": {"gbs": 0.118, "alpha_us": 60}})"));
  const NodeSummary node = nvswitch_node();
  EXPECT_EQ(choose_algorithm(node, 2, 2, CollectiveKind::kAllReduce, 64 << 20, m), "hier");
  EXPECT_EQ(choose_algorithm(node, 3, 2, CollectiveKind::kAllReduce, 64 << 20, m), "hier");
  EXPECT_NE(choose_algorithm(node, 4, 1, CollectiveKind::kAllReduce, 64 << 20, m), "hier");
  // Reduce-scatter and all-gather: ring, hier or the packed trees (the double binary tree and
  // halving-doubling are Weft's for all-reduce only); hier where nodes have several ranks and the
  // data is large.
  for (CollectiveKind c : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather}) {
    EXPECT_EQ(choose_algorithm(node, 2, 2, c, 64 << 20, m), "hier") << collective_name(c);
    EXPECT_EQ(choose_algorithm(node, 3, 2, c, 64 << 20, m), "hier") << collective_name(c);
    EXPECT_EQ(choose_algorithm(node, 4, 1, c, 64 << 20, m), "ring") << collective_name(c);
    for (size_t bytes : {size_t{0}, size_t{8}, size_t{4096}, size_t{1} << 20})
      for (int nodes : {2, 3, 4})
        EXPECT_TRUE(choose_algorithm(node, nodes, 2, c, bytes, m) == "ring" ||
                    choose_algorithm(node, nodes, 2, c, bytes, m) == "hier" ||
                    choose_algorithm(node, nodes, 2, c, bytes, m) == "forest");
  }
  // Rooted collectives: the runtime's measured crossover between binomial tree and chain.
  EXPECT_EQ(choose_algorithm(node, 2, 2, CollectiveKind::kBroadcast, 64 << 20, m), "chain");
  EXPECT_EQ(choose_algorithm(node, 2, 2, CollectiveKind::kBroadcast, 1024, m), "binomial");
  EXPECT_EQ(choose_algorithm(node, 2, 2, CollectiveKind::kReduce, 64 << 20, m), "chain");
  // The phases overlap: the prediction is the slowest phase (here the rails, which share the
  // nodes' links) plus a slice of each other phase and the latencies, not the sum of the phases.
  const NodeSummary cpu = testing::load_summary(testing::fixture("cpu-only-2socket-2nic-hwloc2.xml"));
  auto plans = rank_plans(make_uniform_cluster(cpu, 2, 4), CollectiveKind::kAllReduce, 64 << 20, m);
  int seen = 0;
  for (const auto& c : plans) {
    if (c.plan.algorithm != "hier") continue;
    ++seen;
    const double rails = 2.0 * 1 / 2 * (64 << 20) / 4.0 / (c.plan.bottleneck_gbs * 1e3);
    EXPECT_GT(c.predicted_us, rails);
    EXPECT_LT(c.predicted_us, rails * 1.05);
    EXPECT_NE(c.plan.explain().find("4 rails share 2 NICs"), std::string::npos) << c.plan.explain();
  }
  EXPECT_EQ(seen, 1);
}

TEST(TopoPlans, CostModelOverrides) {
  auto view = make_uniform_cluster(nvswitch_node(), 2, 8);
  CostModel m = CostModel::defaults();
  auto base = rank_plans(view, CollectiveKind::kAllGather, 1 << 26, m);
  m.apply_json(nlohmann::json::parse(R"({"net": {"gbs": 1.0, "alpha_us": 50}, "classes": {"NV": {"alpha_us": 3}}})"));
  EXPECT_DOUBLE_EQ(m.classes[static_cast<int>(PathClass::kNV)].alpha_us, 3.0);
  auto slow = rank_plans(view, CollectiveKind::kAllGather, 1 << 26, m);
  EXPECT_GT(slow.front().predicted_us, base.front().predicted_us);
  EXPECT_THROW(m.apply_json(nlohmann::json::parse(R"({"classes": {"FOO": {}}})")), Error);
  EXPECT_THROW(m.apply_json(nlohmann::json::parse(R"({"net": {"gbs": -1}})")), Error);
  const std::string path = ::testing::TempDir() + "/weft_cost.json";
  std::ofstream(path) << R"({"net": {"gbs": 2.5}})";
  ::setenv("WEFT_COST_MODEL", path.c_str(), 1);
  CostModel env = CostModel::from_env();
  ::unsetenv("WEFT_COST_MODEL");
  EXPECT_DOUBLE_EQ(env.net.gbs, 2.5);
  EXPECT_TRUE(env.fixed_net_gbs);
  std::remove(path.c_str());
}

// More ranks than cores on a machine (emulated nodes, oversubscribed jobs): every step on a plan's
// critical path waits for a core. Small messages then favour the plans with fewest steps in
// sequence; large ones are unchanged while the transfer takes longer than those waits; with
// ranks <= cores nothing changes.
TEST(TopoPlans, SharedCpuTerm) {
  const NodeSummary cpu = testing::load_summary(testing::fixture("cpu-only-2socket-2nic-hwloc2.xml"));
  auto view = make_uniform_cluster(cpu, 3, 2);
  CostModel m = CostModel::defaults();
  m.apply_json(nlohmann::json::parse(R"({"net": {"gbs": 0.119, "alpha_us": 30}, "host": {"msg_cpu_us": 50}})"));
  EXPECT_DOUBLE_EQ(m.host.msg_cpu_us, 50);
  auto predicted = [&](const CostModel& model, size_t bytes) {
    std::map<std::string, double> t;
    for (const auto& c : rank_plans(view, CollectiveKind::kAllReduce, bytes, model)) t[c.plan.algorithm] = c.predicted_us;
    return t;
  };
  const auto alone = predicted(m, 4096);  // host.ranks unset: no CPU term
  CostModel shared = m;
  shared.host.ranks = 6, shared.host.cores = 2;
  // A step waits for the bursts of the other ranks on its core: 50 us x (6 / 2 - 1).
  EXPECT_DOUBLE_EQ(host_wait_us(shared.host, 6), 100);
  EXPECT_DOUBLE_EQ(host_wait_us(shared.host, 4), 50);   // a 4-rank job: 4 ranks on the 2 cores
  EXPECT_DOUBLE_EQ(host_wait_us(shared.host, 2), 0);    // as many ranks as cores
  EXPECT_DOUBLE_EQ(host_wait_us(m.host, 6), 0);         // ranks unknown
  const auto small = predicted(shared, 4096);
  // 4 KiB: the ring's 10 steps in sequence wait 1000 us in all, more than its transfer; the other
  // plans have 6 steps each (tree depth 3 up and down; fold, 2 halvings, 2 doublings, unfold;
  // 1 + 2 steps inside the node and along the rails, twice): 600 us.
  EXPECT_NEAR(small.at("ring") - alone.at("ring"),
              1000 - 2.0 * 5 / 6 * 4096 / (0.119 * 1e3), 1e-6);
  for (std::string a : {"tree", "rhd", "hier"}) {
    EXPECT_GT(small.at(a), alone.at(a) + 400) << a;
    EXPECT_LE(small.at(a), alone.at(a) + 600 + 1e-6) << a;
    EXPECT_LT(small.at(a), small.at("ring")) << a;
  }
  EXPECT_NE(rank_plans(view, CollectiveKind::kAllReduce, 4096, shared).front().plan.explain().find("ranks share 2 cores"),
            std::string::npos);
  // 64 MiB: the transfer hides the CPU.
  const auto big_alone = predicted(m, 64 << 20), big_shared = predicted(shared, 64 << 20);
  EXPECT_DOUBLE_EQ(big_shared.at("hier"), big_alone.at("hier"));
  EXPECT_DOUBLE_EQ(big_shared.at("ring"), big_alone.at("ring"));
  // As many ranks as cores: no term.
  shared.host.cores = 6;
  EXPECT_EQ(predicted(shared, 4096), alone);
  EXPECT_THROW(m.apply_json(nlohmann::json::parse(R"({"host": {"msg_cpu_us": -1}})")), Error);
  EXPECT_THROW(m.apply_json(nlohmann::json::parse(R"({"host": 3})")), Error);
}

// The tree's and halving-doubling's predictions count the bytes that Weft's own schedules send
// through each node's NIC (over the ranks in node order): a slow network, intra-node links 10^4
// times faster, no latency, so each prediction is (busiest NIC's bytes) / (NIC speed) for a
// buffer of many slices; the tree's pipeline fill is negligible there, and all of its time when
// each half is one slice.
TEST(TopoPlans, TreeAndHalvingDoublingCountTheirNicBytes) {
  const NodeSummary cpu = testing::load_summary(testing::fixture("cpu-only-2socket-2nic-hwloc2.xml"));
  CostModel m = CostModel::defaults();
  m.apply_json(nlohmann::json::parse(R"({"net": {"gbs": 0.1, "alpha_us": 0}, "classes": {"X": {"alpha_us": 0, "gbs": 1000}}})"));
  struct Case {
    int nodes, per;
    double tree, rhd;  // busiest NIC's bytes each way, in buffers
  };
  // 2x2: tree 2 (each node sends two edges' halves up and two down); halving-doubling 1 (S/2 per
  // phase: the S/2 halving step stays inside the node). 4x1: 2 and 1.5 (S/2 + S/4 per phase).
  // 3x2: 2 and 2 (the fold stays inside nodes 0 and 1; node 2's two ranks both exchange S/2 with
  // other nodes at the first step). 2x4: 2 and 1 (only the last halving step crosses: 4 x S/8).
  for (Case c : {Case{2, 2, 2.0, 1.0}, Case{4, 1, 2.0, 1.5}, Case{3, 2, 2.0, 2.0}, Case{2, 4, 2.0, 1.0}}) {
    auto view = make_uniform_cluster(cpu, c.nodes, c.per);
    for (auto& b : view.bindings) b.nic = view.bindings[0].nic, b.numa = 0;  // one NIC per node
    const size_t S = size_t{256} << 20;    // 256 slices of 512 KiB per half
    const double unit = S / (0.1 * 1e3);  // us to move S once through a NIC
    std::map<std::string, double> t;
    for (const auto& p : rank_plans(view, CollectiveKind::kAllReduce, S, m)) t[p.plan.algorithm] = p.predicted_us;
    EXPECT_NEAR(t.at("tree") / unit, c.tree, 0.01) << c.nodes << "x" << c.per;
    EXPECT_NEAR(t.at("rhd") / unit, c.rhd, 0.01) << c.nodes << "x" << c.per;
    // The same ranks dealt round-robin over the nodes: the schedules follow the nodes, so does the model.
    ClusterView dealt = view;
    for (int r = 0; r < view.size(); ++r) {
      dealt.node_of_rank[r] = r % c.nodes;
      dealt.local_rank[r] = r / c.nodes;
    }
    for (int n = 0; n < c.nodes; ++n) {
      dealt.ranks_of_node[n].clear();
      for (int r = 0; r < view.size(); ++r)
        if (r % c.nodes == n) dealt.ranks_of_node[n].push_back(r);
    }
    for (const auto& p : rank_plans(dealt, CollectiveKind::kAllReduce, S, m)) {
      if (p.plan.algorithm == "tree" || p.plan.algorithm == "rhd") {
        EXPECT_NEAR(p.predicted_us, t.at(p.plan.algorithm), 1e-6 * unit) << c.nodes << "x" << c.per << " dealt";
      }
    }
  }
  // 1 MiB on 3x2: 4 slices of 128 KiB per half; the busiest NIC moves 3 of them (3/4 x 2 MiB)
  // while the last one goes up 3 hops between nodes and down again, one hop after the other
  // (6 x 128 KiB): 2.25 times the buffer, more than the NIC's 2 x 1 MiB.
  auto view = make_uniform_cluster(cpu, 3, 2);
  for (auto& b : view.bindings) b.nic = view.bindings[0].nic, b.numa = 0;
  for (const auto& p : rank_plans(view, CollectiveKind::kAllReduce, 1 << 20, m))
    if (p.plan.algorithm == "tree") {
      EXPECT_NEAR(p.predicted_us / ((1 << 20) / 100.0), 2.25, 0.01);
    }
  // A long round trip: the window (kTreeWindowSlices slices in flight per tree) sets the pace.
  // 4x1, 1 ms per hop, 100 GB/s: 256 slices of 128 KiB per half of 64 MiB, 8 per round trip of
  // 2 hops up and 2 down, plus the latency of the last slice's trip. On the trip each hop's NIC
  // carries 4 tree edges (ranks 1 and 2: interior in one tree, a leaf in the other), counted as
  // 3.5 slices' time.
  CostModel slow = CostModel::defaults();
  slow.apply_json(nlohmann::json::parse(R"({"net": {"gbs": 100, "alpha_us": 1000}, "classes": {"X": {"alpha_us": 0, "gbs": 1000}}})"));
  auto four = make_uniform_cluster(cpu, 4, 1);
  for (const auto& p : rank_plans(four, CollectiveKind::kAllReduce, size_t{64} << 20, slow))
    if (p.plan.algorithm == "tree") {
      const double trip = 4 * (1000 + 3.5 * 131072 / 1e5);
      EXPECT_NEAR(p.predicted_us, 256.0 / kTreeWindowSlices * trip + 4 * 1000, 0.01 * p.predicted_us);
      EXPECT_NE(p.plan.reasons.end(), std::find_if(p.plan.reasons.begin(), p.plan.reasons.end(), [](const std::string& s) {
                  return s.find("window") != std::string::npos;
                }));
    }
  // The slice the ranks run (WEFT_SLICE_BYTES, passed to the planner) is the slice the model
  // assumes: with 1 MiB slices each half is 128 slices of 256 KiB, half as many round trips.
  for (const auto& p : rank_plans(four, CollectiveKind::kAllReduce, size_t{64} << 20, slow, 1 << 20))
    if (p.plan.algorithm == "tree") {
      const double trip = 4 * (1000 + 3.5 * 262144 / 1e5);
      EXPECT_NEAR(p.predicted_us, 128.0 / kTreeWindowSlices * trip + 4 * 1000, 0.01 * p.predicted_us);
    }
}

// The packed trees are run only where they are packed (up to kForestExactRanks ranks; above, their
// row is the cut bound and the ranks would run the fallback chains) and where they are predicted
// clearly faster than the rest (5%): on the partial mesh of the emulated cluster, yes.
TEST(TopoPlans, PackedTreesChosenOnlyWherePackedAndClearlyFaster) {
  CostModel m = CostModel::defaults();
  const NodeSummary node = nvswitch_node();
  const int nodes = kForestExactRanks / 8 + 1;
  bool listed = false;
  for (const auto& c : rank_plans(make_uniform_cluster(node, nodes, 8), CollectiveKind::kAllReduce, 256 << 20, m))
    listed |= c.plan.algorithm == "forest";
  EXPECT_TRUE(listed);
  EXPECT_NE(choose_algorithm(node, nodes, 8, CollectiveKind::kAllReduce, 256 << 20, m), "forest");
  const NodeSummary cpu = testing::load_summary(testing::fixture("cpu-only-2socket-2nic-hwloc2.xml"));
  CostModel mesh = CostModel::defaults();
  mesh.apply_json(nlohmann::json::parse(
      R"({"net": {"alpha_us": 60, "gbs": 0.029}, "fabric": {"links": "0-1:250mbit,1-2:250mbit,2-3:250mbit,3-0:250mbit,0-2:62500kbit"}})"));
  EXPECT_EQ(choose_algorithm(cpu, 4, 1, CollectiveKind::kAllReduce, 64 << 20, mesh), "forest");
}

TEST(TopoPlans, CpuOnlyCluster) {
  auto s = testing::load_summary(testing::fixture("cpu-only-2socket-2nic-hwloc2.xml"));
  auto view = make_uniform_cluster(s, 3, 4);
  auto plans = rank_plans(view, CollectiveKind::kBroadcast, 1 << 20);
  EXPECT_EQ(plans.size(), 4u);
  for (const auto& c : plans) EXPECT_GT(c.predicted_us, 0);
  EXPECT_EQ(view.bindings[2].nic, "mlx5_1");
  auto single = make_uniform_cluster(s, 1, 1);
  EXPECT_EQ(rank_plans(single, CollectiveKind::kAllReduce, 1024).front().predicted_us, 0);
}

}  // namespace
}  // namespace weft::topo
