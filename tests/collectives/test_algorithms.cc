// Schedule-level tests: every algorithm's schedules for all ranks of a world run together in the
// simulator (tests/collectives/schedule_sim.h), against the independent reference of
// collective_check.h, over many rank counts, sizes, slicings, roots and placements, under random
// interleavings. No transport involved.
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <set>

#include "collectives/algorithms/builtin.h"
#include "collectives/algorithms/tree.h"
#include "collectives/collective.h"
#include "runtime/base/error.h"
#include "collective_check.h"
#include "schedule_sim.h"

using namespace weft;
using namespace weft::test;

namespace {

// Builds and simulates one case; returns "" or the failure.
std::string run_case(const Algorithm& algo, const CollCase& c, const AlgoOptions& opt, uint64_t seed) {
  std::vector<RankBuffers> bufs;
  std::vector<Schedule> scheds;
  std::vector<SimRank> sim;
  CollectiveArgs a{c.kind, c.count, c.dt, c.op, c.root, c.in_place};
  for (int r = 0; r < c.n; ++r) bufs.push_back(make_buffers(c, r));
  try {
    for (int r = 0; r < c.n; ++r) scheds.push_back(build_schedule(algo, a, r, c.n, opt));
  } catch (const std::exception& e) {
    return fmt::format("building: {}", e.what());
  }
  for (auto& b : bufs) sim.push_back({b.send, b.recv});
  if (std::string err = simulate(scheds, sim, seed); !err.empty()) return err;
  for (int r = 0; r < c.n; ++r)
    if (std::string err = check_buffers(c, r, bufs[r]); !err.empty()) return err;
  return {};
}

struct TypeOp {
  DataType dt;
  RedOp op;
};

class AlgoSim : public ::testing::TestWithParam<CollectiveKind> {};

TEST_P(AlgoSim, AllRankCountsSizesSlicingsAndPlacements) {
  const CollectiveKind kind = GetParam();
  const bool reducing = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter ||
                        kind == CollectiveKind::kReduce;
  const bool rooted = kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce;
  std::vector<TypeOp> tops = {{DataType::kInt32, RedOp::kSum}};
  if (reducing) tops = {{DataType::kInt32, RedOp::kSum}, {DataType::kFloat32, RedOp::kAvg}, {DataType::kInt8, RedOp::kMax},
                        {DataType::kFloat16, RedOp::kProd}};
  else tops.push_back({DataType::kFloat64, RedOp::kSum});
  int cases = 0;
  // WEFT_ALGOSIM_MAX_RANKS bounds the worlds (scripts/sanitize: 7 under ASan, where 9, 12 and 16
  // ranks were most of this binary's time and reach no code that 1..7 do not).
  const char* max_env = std::getenv("WEFT_ALGOSIM_MAX_RANKS");
  const int max_ranks = max_env ? std::atoi(max_env) : 16;
  for (const Algorithm* algo : algorithms_for(kind)) {
    if (algo->native()) continue;  // no schedule to check
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16}) {
      if (n > max_ranks) continue;
      for (uint64_t count : {0ull, 1ull, 2ull, 3ull, 7ull, 13ull, 64ull, 1009ull}) {
        for (bool in_place : {false, true}) {
          for (uint64_t slice : {8ull, 256ull, 512ull * 1024}) {
            if (slice == 8 && count > 64) continue;  // thousands of steps: slow, adds nothing
            for (int channels : {1, 3}) {
              if (channels > 1 && std::string(algo->id) != "ring") continue;
              std::vector<int> roots = {0};
              if (rooted && n > 1) roots = {0, n - 1, n / 2};
              for (int root : roots) {
                for (size_t t = 0; t < tops.size(); ++t) {
                  if (n > 9 && t > 0) continue;  // the big worlds with one type only
                  CollCase c{kind, tops[t].dt, tops[t].op, count, n, root, in_place};
                  AlgoOptions opt;
                  opt.slice_bytes = slice;
                  opt.channels = channels;
                  uint64_t seed = cases * 7919ull + 1;
                  std::string err = run_case(*algo, c, opt, seed);
                  ASSERT_EQ(err, "") << algo->id << ": " << c.label() << " slice=" << slice << " channels=" << channels
                                     << " seed=" << seed;
                  ++cases;
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 0);
}

INSTANTIATE_TEST_SUITE_P(Kinds, AlgoSim,
                         ::testing::Values(CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                                           CollectiveKind::kAllGather, CollectiveKind::kBroadcast,
                                           CollectiveKind::kReduce, CollectiveKind::kAllToAll, CollectiveKind::kBarrier),
                         [](const auto& info) { return std::string(collective_name(info.param)); });

TEST(AlgoSim, ManyInterleavingsOfPipelinedSchedules) {
  // The same cases under 20 random orders each, with heavy slicing (hazards show as wrong data
  // or as a flagged overlap).
  for (CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather,
                              CollectiveKind::kBroadcast, CollectiveKind::kReduce, CollectiveKind::kAllToAll}) {
    for (const Algorithm* algo : algorithms_for(kind)) {
      if (algo->native()) continue;
      for (int n : {2, 3, 5, 6}) {
        for (bool in_place : {false, true}) {
          for (uint64_t seed = 1; seed <= 20; ++seed) {
            CollCase c{kind, DataType::kFloat32, RedOp::kSum, 37, n, n - 1, in_place};
            AlgoOptions opt;
            opt.slice_bytes = 12;
            opt.channels = 2;
            std::string err = run_case(*algo, c, opt, seed);
            ASSERT_EQ(err, "") << algo->id << ": " << c.label() << " seed=" << seed;
          }
        }
      }
    }
  }
}

// The hierarchical all-reduce, reduce-scatter and all-gather over node layouts: contiguous (nodes x
// ranks per node), interleaved (rank r on node r % nodes), and uneven ones (which fall back to the
// ring).
class HierSim : public ::testing::TestWithParam<CollectiveKind> {};

TEST_P(HierSim, OverNodeLayouts) {
  const CollectiveKind kind = GetParam();
  const Algorithm* hier = find_algorithm("hier", kind);
  ASSERT_NE(hier, nullptr);
  struct Layout {
    std::vector<int> node_of_rank;
    bool hierarchical;
  };
  std::vector<Layout> layouts;
  for (auto [nodes, per] : std::vector<std::pair<int, int>>{{2, 2}, {3, 2}, {2, 3}, {4, 1}, {1, 4}, {2, 4}, {3, 3}, {4, 2}}) {
    std::vector<int> contiguous, interleaved;
    for (int r = 0; r < nodes * per; ++r) contiguous.push_back(r / per), interleaved.push_back(r % nodes);
    layouts.push_back({contiguous, nodes > 1 && per > 1});
    layouts.push_back({interleaved, nodes > 1 && per > 1});
  }
  layouts.push_back({{0, 0, 1}, false});
  layouts.push_back({{5, 5, 2, 2, 5, 2}, true});  // node ids need not be dense
  const std::vector<TypeOp> tops = {{DataType::kInt32, RedOp::kSum}, {DataType::kFloat32, RedOp::kAvg},
                                    {DataType::kInt8, RedOp::kMax}, {DataType::kFloat16, RedOp::kProd}};
  int cases = 0;
  for (const Layout& l : layouts) {
    const int n = static_cast<int>(l.node_of_rank.size());
    EXPECT_EQ(hier_layout(l.node_of_rank, n).empty(), !l.hierarchical);
    for (uint64_t count : {0ull, 1ull, 2ull, 3ull, 5ull, 7ull, 13ull, 64ull, 1009ull}) {
      for (bool in_place : {false, true}) {
        for (uint64_t slice : {4ull, 8ull, 256ull, 512ull * 1024}) {
          if (slice <= 8 && count > 64) continue;
          for (const TypeOp& t : tops) {
            if (kind == CollectiveKind::kAllGather && t.op != RedOp::kSum) continue;
            CollCase c{kind, t.dt, t.op, count, n, 0, in_place};
            AlgoOptions opt;
            opt.slice_bytes = slice;
            opt.node_of_rank = l.node_of_rank;
            uint64_t seed = cases * 104729ull + 3;
            std::string err = run_case(*hier, c, opt, seed);
            ASSERT_EQ(err, "") << "hier: " << c.label() << " layout " << fmt::format("{}", fmt::join(l.node_of_rank, ","))
                               << " slice=" << slice << " seed=" << seed;
            ++cases;
          }
        }
      }
    }
  }
  // Many interleavings of heavily sliced schedules.
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    CollCase c{kind, DataType::kFloat32, RedOp::kSum, 37, 6, 0, seed % 2 == 0};
    AlgoOptions opt;
    opt.slice_bytes = 4;
    opt.node_of_rank = seed % 3 == 0 ? std::vector<int>{0, 1, 2, 0, 1, 2} : std::vector<int>{0, 0, 1, 1, 2, 2};
    ASSERT_EQ(run_case(*hier, c, opt, seed), "") << "seed=" << seed;
  }
}

// Rings and chains visit the nodes one after the other whatever the rank numbering: with ranks
// placed round-robin over nodes (rank r on node r % N) the flat ring all-reduce, reduce-scatter and
// all-gather still cross between nodes on N edges only, and the chain broadcast and reduce enter
// each node once; results stay right for every root.
TEST(AlgoSim, RingsAndChainsFollowTheNodes) {
  struct Case {
    CollectiveKind kind;
    const char* id;
  };
  for (Case k : {Case{CollectiveKind::kAllReduce, "ring"}, Case{CollectiveKind::kReduceScatter, "ring"},
                 Case{CollectiveKind::kAllGather, "ring"}, Case{CollectiveKind::kBroadcast, "chain"},
                 Case{CollectiveKind::kReduce, "chain"}}) {
    const Algorithm* algo = find_algorithm(k.id, k.kind);
    ASSERT_NE(algo, nullptr);
    for (auto [nodes, per] : std::vector<std::pair<int, int>>{{2, 2}, {3, 2}, {2, 3}, {4, 3}}) {
      const int n = nodes * per;
      AlgoOptions opt;
      opt.slice_bytes = 8;
      for (int r = 0; r < n; ++r) opt.node_of_rank.push_back(r % nodes);
      for (int root : {0, 1, n - 1}) {
        for (bool in_place : {false, true}) {
          CollCase c{k.kind, DataType::kInt32, RedOp::kSum, 13, n, root, in_place};
          ASSERT_EQ(run_case(*algo, c, opt, 7 + root), "") << k.id << ": " << c.label();
        }
        // Distinct (sender, receiver) pairs on different nodes over every rank's schedule.
        std::set<std::pair<int, int>> crossing;
        CollectiveArgs a{k.kind, 13, DataType::kInt32, RedOp::kSum, root, false};
        for (int r = 0; r < n; ++r)
          for (const Step& st : build_schedule(*algo, a, r, n, opt).steps)
            if (st.kind == StepKind::kSend && opt.node_of_rank[st.peer] != opt.node_of_rank[r]) crossing.insert({r, st.peer});
        const bool rooted = k.kind == CollectiveKind::kBroadcast || k.kind == CollectiveKind::kReduce;
        EXPECT_EQ(crossing.size(), static_cast<size_t>(rooted ? nodes - 1 : nodes))
            << k.id << " " << collective_name(k.kind) << " " << nodes << "x" << per << " root " << root;
      }
    }
  }
}

// AlgoOptions::ring (the planner's ring, passed by the communicator) is the ring that the ring
// all-reduce, reduce-scatter and all-gather run: each rank sends only to its successor in that
// order, results stay right; a ring that is not a permutation of the ranks is refused, by name.
TEST(AlgoSim, RingsRunTheGivenOrder) {
  const std::vector<int> ring = {3, 0, 5, 2, 4, 1};
  const int n = static_cast<int>(ring.size());
  auto next_of = [&](int r) {
    for (int i = 0; i < n; ++i)
      if (ring[i] == r) return ring[(i + 1) % n];
    return -1;
  };
  for (CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather}) {
    const Algorithm* algo = find_algorithm("ring", kind);
    ASSERT_NE(algo, nullptr);
    AlgoOptions opt;
    opt.slice_bytes = 8;
    opt.ring = ring;
    for (bool in_place : {false, true}) {
      CollCase c{kind, DataType::kInt32, RedOp::kSum, 13, n, 0, in_place};
      ASSERT_EQ(run_case(*algo, c, opt, 3), "") << c.label();
    }
    CollectiveArgs a{kind, 13, DataType::kInt32, RedOp::kSum, 0, false};
    for (int r = 0; r < n; ++r) {
      std::set<int> peers;
      for (const Step& st : build_schedule(*algo, a, r, n, opt).steps)
        if (st.kind == StepKind::kSend) peers.insert(st.peer);
      EXPECT_EQ(peers, std::set<int>{next_of(r)}) << collective_name(kind) << " rank " << r;
    }
    for (const auto& [bad, what] : std::vector<std::pair<std::vector<int>, std::string>>{
             {{0, 1, 2}, "3 positions for 6 ranks"}, {{0, 1, 2, 3, 4, 4}, "rank 4 appears twice"},
             {{0, 1, 2, 3, 4, 6}, "rank 6 is not in 0..5"}}) {
      opt.ring = bad;
      try {
        build_schedule(*algo, a, 0, n, opt);
        ADD_FAILURE() << "accepted the ring order " << fmt::format("{}", fmt::join(bad, ","));
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, HierSim,
                         ::testing::Values(CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                                           CollectiveKind::kAllGather),
                         [](const auto& info) { return std::string(collective_name(info.param)); });

// The tree and halving-doubling all-reduces place the ranks in node order too: right results over
// contiguous, round-robin and uneven node layouts; and on 2 nodes x 2 ranks (either numbering)
// halving-doubling's first halving step stays inside the nodes, so each node sends half the
// vector across per phase (S in all; 2 x S if the distances shrank instead of grew).
TEST(AlgoSim, TreeAndHalvingDoublingFollowTheNodes) {
  const std::vector<std::vector<int>> layouts = {{0, 0, 1, 1}, {0, 1, 0, 1}, {0, 1, 2, 0, 1, 2}, {0, 0, 1, 1, 1},
                                                 {2, 0, 1, 2, 0, 1, 2}, {0, 1, 0, 1, 0, 1, 0, 1}};
  for (const char* id : {"tree", "rhd"}) {
    const Algorithm* algo = find_algorithm(id, CollectiveKind::kAllReduce);
    ASSERT_NE(algo, nullptr);
    for (const auto& nodes : layouts) {
      const int n = static_cast<int>(nodes.size());
      for (uint64_t count : {0ull, 1ull, 7ull, 37ull, 1009ull})
        for (bool in_place : {false, true})
          for (TypeOp t : {TypeOp{DataType::kInt32, RedOp::kSum}, TypeOp{DataType::kFloat32, RedOp::kAvg},
                           TypeOp{DataType::kInt8, RedOp::kMin}}) {
            AlgoOptions opt;
            opt.slice_bytes = 16;
            opt.node_of_rank = nodes;
            CollCase c{CollectiveKind::kAllReduce, t.dt, t.op, count, n, 0, in_place};
            ASSERT_EQ(run_case(*algo, c, opt, count * 31 + n), "")
                << id << ": " << c.label() << " layout " << fmt::format("{}", fmt::join(nodes, ","));
          }
    }
  }
  const Algorithm* rhd = find_algorithm("rhd", CollectiveKind::kAllReduce);
  for (const std::vector<int>& nodes : {std::vector<int>{0, 0, 1, 1}, std::vector<int>{0, 1, 0, 1}}) {
    AlgoOptions opt;
    opt.node_of_rank = nodes;
    const uint64_t count = 1024, S = count * 4;
    CollectiveArgs a{CollectiveKind::kAllReduce, count, DataType::kInt32, RedOp::kSum, 0, false};
    std::vector<uint64_t> out(2, 0);
    for (int r = 0; r < 4; ++r)
      for (const Step& st : build_schedule(*rhd, a, r, 4, opt).steps)
        if (st.kind == StepKind::kSend && nodes[st.peer] != nodes[r]) out[nodes[r]] += st.bytes;
    EXPECT_EQ(out[0], S) << fmt::format("{}", fmt::join(nodes, ","));
    EXPECT_EQ(out[1], S) << fmt::format("{}", fmt::join(nodes, ","));
  }
}

// Halving-doubling keeps its steps apart on the wire: the first doubling send waits (directly or
// not) for every send of the last halving step, even where the owned block is final earlier.
TEST(AlgoSim, HalvingDoublingStartsDoublingAfterTheLastHalvingSends) {
  const Algorithm* rhd = find_algorithm("rhd", CollectiveKind::kAllReduce);
  ASSERT_NE(rhd, nullptr);
  for (int n : {4, 6, 8}) {
    AlgoOptions opt;
    opt.slice_bytes = 64;
    CollectiveArgs a{CollectiveKind::kAllReduce, 4096, DataType::kFloat32, RedOp::kSum, 0, false};
    for (int r = 0; r < n; ++r) {
      const Schedule s = build_schedule(*rhd, a, r, n, opt);
      // The partner at distance p/2 gets the last halving step's slices, then the first doubling
      // send; ranks folded away take no part. (Sends of no bytes, the clear-to-send of a
      // non-power-of-two count, carry nothing to wait for.)
      std::map<int, std::vector<StepId>> sends;
      for (StepId i = 0; i < s.steps.size(); ++i)
        if (s.steps[i].kind == StepKind::kSend && s.steps[i].bytes > 0) sends[s.steps[i].peer].push_back(i);
      std::vector<StepId> last_halving;
      StepId first_doubling = kNoStep;
      // Halving and the fold send slices of at most slice_bytes; doubling sends whole blocks.
      StepId last_sliced = 0;
      for (StepId i = 0; i < s.steps.size(); ++i)
        if (s.steps[i].kind == StepKind::kSend && s.steps[i].bytes <= opt.slice_bytes && i > last_sliced) last_sliced = i;
      for (StepId i = last_sliced + 1; i < s.steps.size() && first_doubling == kNoStep; ++i)
        if (s.steps[i].kind == StepKind::kSend) first_doubling = i;
      if (first_doubling == kNoStep) continue;  // a folded-away rank
      const int partner = s.steps[first_doubling].peer;
      for (StepId id : sends[partner])
        if (id < first_doubling) last_halving.push_back(id);
      ASSERT_FALSE(last_halving.empty()) << "n=" << n << " rank " << r;
      std::vector<char> seen(s.steps.size(), 0);
      std::vector<StepId> todo{first_doubling};
      while (!todo.empty()) {
        StepId x = todo.back();
        todo.pop_back();
        for (uint32_t k = 0; k < s.steps[x].dep_count; ++k)
          if (StepId d = s.deps[s.steps[x].dep_begin + k]; !seen[d]) seen[d] = 1, todo.push_back(d);
      }
      for (StepId id : last_halving) EXPECT_TRUE(seen[id]) << "n=" << n << " rank " << r << ": send " << id;
    }
  }
}

TEST(DoubleBinaryTree, TreesAreValidAndComplementary) {
  for (int n = 1; n <= 70; ++n) {
    std::vector<int> inner(n, 0);
    for (int t = 0; t < 2; ++t) {
      topo::Tree tree = rank_tree(AlgoOptions{}, n, t);
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        ASSERT_LE(tree.children[r].size(), 2u) << "n=" << n << " tree " << t << " rank " << r;
        if (tree.parent[r] < 0) ++roots;
        if (!tree.children[r].empty()) ++inner[r];
        for (int c : tree.children[r]) ASSERT_EQ(tree.parent[c], r);
        // Walking up reaches the root.
        int x = r, hops = 0;
        while (tree.parent[x] >= 0 && hops <= n) x = tree.parent[x], ++hops;
        ASSERT_EQ(x, tree.root) << "n=" << n << " tree " << t;
      }
      ASSERT_EQ(roots, 1);
    }
    // No rank forwards both halves: every rank is a leaf in at least one tree.
    for (int r = 0; r < n; ++r) EXPECT_LE(inner[r], 1) << "n=" << n << " rank " << r;
  }
}

// The trees are laid over the ranks in node order: however the ranks are dealt to nodes, the
// edges between nodes are as few as with consecutive ranks on each node.
TEST(DoubleBinaryTree, FollowsTheNodes) {
  int total = 0, total_naive = 0;
  for (int nodes : {2, 3, 4}) {
    for (int per : {2, 3, 4}) {
      const int n = nodes * per;
      AlgoOptions block, dealt;
      for (int r = 0; r < n; ++r) {
        block.node_of_rank.push_back(r / per);
        dealt.node_of_rank.push_back(r % nodes);  // mpirun --map-by node
      }
      auto crossings = [&](const AlgoOptions& o) {
        int c = 0;
        for (int t = 0; t < 2; ++t) {
          topo::Tree tree = rank_tree(o, n, t);
          for (int r = 0; r < n; ++r)
            if (tree.parent[r] >= 0 && o.node_of_rank[r] != o.node_of_rank[tree.parent[r]]) ++c;
        }
        return c;
      };
      AlgoOptions unaware;  // the same dealt ranks, trees over rank numbers
      int naive = 0;
      for (int t = 0; t < 2; ++t) {
        topo::Tree tree = rank_tree(unaware, n, t);
        for (int r = 0; r < n; ++r)
          if (tree.parent[r] >= 0 && dealt.node_of_rank[r] != dealt.node_of_rank[tree.parent[r]]) ++naive;
      }
      EXPECT_EQ(crossings(dealt), crossings(block)) << nodes << "x" << per;
      EXPECT_LE(crossings(dealt), naive) << nodes << "x" << per;
      total += crossings(dealt);
      total_naive += naive;
    }
  }
  EXPECT_LT(total, total_naive);
}

// The tree's window: a rank starts with only kTreeWindowSlices up-sends of a tree it is a leaf in
// (the lowest slices); each later one waits for a slice to come back down. Without the window a
// leaf posts its whole half at once.
TEST(DoubleBinaryTree, KeepsAWindowOfSlicesInFlight) {
  const Algorithm* tree = find_algorithm("tree", CollectiveKind::kAllReduce);
  ASSERT_NE(tree, nullptr);
  AlgoOptions opt;  // default slice_bytes: slices of slice_bytes / kTreeSliceDivisor
  const uint64_t slice = opt.slice_bytes / topo::kTreeSliceDivisor;
  const uint64_t count = 2 * 10 * slice / 4 + 3;  // floats: 10 slices and a bit per half
  for (int n : {4, 5, 8}) {
    for (int r = 0; r < n; ++r) {
      const Schedule s = build_schedule(*tree, {CollectiveKind::kAllReduce, count, DataType::kFloat32, RedOp::kSum, 0, false},
                                        r, n, opt);
      int leaf_of = 0;
      for (int t = 0; t < 2; ++t) leaf_of += rank_tree(opt, n, t).is_leaf(r);
      std::vector<uint64_t> free_sends;  // sends that wait for nothing
      for (size_t i = 0; i < s.steps.size(); ++i)
        if (s.steps[i].kind == StepKind::kSend && s.initial_deps[i] == 0) free_sends.push_back(s.steps[i].src.offset);
      EXPECT_EQ(free_sends.size(), static_cast<size_t>(leaf_of * topo::kTreeWindowSlices)) << "n=" << n << " rank " << r;
      for (uint64_t off : free_sends) {
        const uint64_t half_start = off >= count / 2 * 4 ? count / 2 * 4 : 0;
        EXPECT_LT(off - half_start, topo::kTreeWindowSlices * slice) << "n=" << n << " rank " << r;
      }
    }
  }
  for (int n : {4, 5, 8})
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      CollCase c{CollectiveKind::kAllReduce, DataType::kFloat32, RedOp::kSum, count, n, 0, false};
      EXPECT_EQ(run_case(*tree, c, opt, seed), "") << "n=" << n;
    }
}

TEST(AlgorithmTable, EveryCollectiveHasAnAlgorithmAndIdsAreUniquePerKind) {
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    auto kind = static_cast<CollectiveKind>(k);
    if (kind == CollectiveKind::kSend || kind == CollectiveKind::kRecv) continue;
    auto all = algorithms_for(kind);
    ASSERT_FALSE(all.empty()) << collective_name(kind);
    for (size_t i = 0; i < all.size(); ++i)
      for (size_t j = i + 1; j < all.size(); ++j) EXPECT_STRNE(all[i]->id, all[j]->id);
    for (int n : {1, 2, 3, 4, 8, 64})
      for (uint64_t bytes : {0ull, 8ull, 4096ull, 1ull << 20, 1ull << 26}) EXPECT_NE(default_algorithm(kind, bytes, n), nullptr);
  }
}

}  // namespace

// ---- Packed spanning trees (`forest`) over forests of any shape ----------------------------------

namespace {

// For every root 1-3 random spanning trees (each rank hangs under a random rank placed before it
// in a random order from the root), random shares, some zero.
std::vector<topo::WeightedTree> random_forest(int n, std::mt19937_64& g) {
  std::vector<topo::WeightedTree> out;
  for (int root = 0; root < n; ++root) {
    const int k = 1 + static_cast<int>(g() % 3);
    for (int t = 0; t < k; ++t) {
      std::vector<int> order;
      for (int r = 0; r < n; ++r)
        if (r != root) order.push_back(r);
      std::shuffle(order.begin(), order.end(), g);
      order.insert(order.begin(), root);
      std::vector<int> parent(n, -1);
      for (int i = 1; i < n; ++i) parent[order[i]] = order[g() % i];
      const double share = t == 1 && k == 3 ? 0.0 : 1.0 + static_cast<double>(g() % 5);
      out.push_back({topo::tree_from_parents(parent), share});
    }
  }
  return out;
}

}  // namespace

TEST(ForestSim, RandomForestsEveryKindSizeAndPlacement) {
  const std::vector<TypeOp> tops = {{DataType::kInt32, RedOp::kSum}, {DataType::kFloat32, RedOp::kAvg},
                                    {DataType::kInt8, RedOp::kMax}, {DataType::kFloat16, RedOp::kProd}};
  std::mt19937_64 g(2402);
  int cases = 0;
  for (CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather}) {
    const Algorithm* forest = find_algorithm("forest", kind);
    ASSERT_NE(forest, nullptr) << collective_name(kind);
    for (int n : {1, 2, 3, 4, 5, 7, 9, 12}) {
      for (uint64_t count : {0ull, 1ull, 2ull, 3ull, 7ull, 13ull, 64ull, 1009ull}) {
        for (bool in_place : {false, true}) {
          for (uint64_t slice : {4ull, 16ull, 512ull * 1024}) {
            if (slice <= 16 && count > 64) continue;
            for (size_t t = 0; t < tops.size(); ++t) {
              if ((kind == CollectiveKind::kAllGather && t > 0) || (n > 7 && t > 1)) continue;
              AlgoOptions opt;
              opt.slice_bytes = slice;
              opt.forest = random_forest(n, g);
              CollCase c{kind, tops[t].dt, tops[t].op, count, n, 0, in_place};
              const uint64_t seed = cases * 6151ull + 5;
              ASSERT_EQ(run_case(*forest, c, opt, seed), "") << c.label() << " slice=" << slice << " seed=" << seed;
              ++cases;
            }
          }
        }
      }
    }
  }
  // Many interleavings of heavily sliced forests.
  for (uint64_t seed = 1; seed <= 40; ++seed)
    for (CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather}) {
      AlgoOptions opt;
      opt.slice_bytes = 4;
      opt.forest = random_forest(5, g);
      CollCase c{kind, DataType::kFloat32, RedOp::kSum, 37, 5, 0, seed % 2 == 0};
      ASSERT_EQ(run_case(*find_algorithm("forest", kind), c, opt, seed), "") << collective_name(kind) << " seed=" << seed;
    }
  EXPECT_GT(cases, 500);
}

// A rank talks only to its neighbours in some tree, and every tree edge that carries data is used.
TEST(ForestSim, MessagesFollowTheTrees) {
  std::mt19937_64 g(7);
  const int n = 6;
  AlgoOptions opt;
  opt.forest = random_forest(n, g);
  std::set<std::pair<int, int>> edges;  // (parent, child) of trees with a share
  for (const auto& t : opt.forest)
    for (int v = 0; v < n; ++v)
      if (t.tree.parent[v] >= 0 && t.share > 0) edges.insert({t.tree.parent[v], v});
  const CollectiveArgs a{CollectiveKind::kAllReduce, 6000, DataType::kFloat32, RedOp::kSum, 0, false};
  std::set<std::pair<int, int>> used;
  for (int r = 0; r < n; ++r)
    for (const Step& st : build_schedule(*find_algorithm("forest", a.kind), a, r, n, opt).steps)
      if (st.kind == StepKind::kSend) {
        EXPECT_TRUE(edges.count({r, st.peer}) || edges.count({st.peer, r})) << r << " -> " << st.peer;
        used.insert(edges.count({r, st.peer}) ? std::pair{r, st.peer} : std::pair{st.peer, r});
      }
  EXPECT_EQ(used, edges);
}

TEST(ForestSim, BadForestsAreRefusedByName) {
  const Algorithm* forest = find_algorithm("forest", CollectiveKind::kAllReduce);
  const CollectiveArgs a{CollectiveKind::kAllReduce, 64, DataType::kInt32, RedOp::kSum, 0, false};
  auto tree = [](std::vector<int> parent, double share) {
    topo::WeightedTree t;
    t.tree.parent = parent;
    t.tree.children.assign(parent.size(), {});
    for (size_t v = 0; v < parent.size(); ++v)
      if (parent[v] < 0) t.tree.root = static_cast<int>(v);
      else if (parent[v] < static_cast<int>(parent.size())) t.tree.children[parent[v]].push_back(static_cast<int>(v));
    t.share = share;
    return t;
  };
  const std::vector<topo::WeightedTree> good = {tree({-1, 0, 1}, 1), tree({1, -1, 1}, 1), tree({2, 2, -1}, 1)};
  for (const auto& [bad, what] : std::vector<std::pair<std::vector<topo::WeightedTree>, std::string>>{
           {{tree({-1, 0}, 1), good[1], good[2]}, "tree 0 has 2 vertices for 3 ranks"},
           {{tree({-1, 2, 1}, 1), good[1], good[2]}, "does not reach the root"},
           {{tree({-1, 0, 5}, 1), good[1], good[2]}, "vertex 2 has parent 5"},
           {{good[0], tree({1, -1, 1}, -1), good[2]}, "tree 1 has share -1"},
           {{good[0], good[1]}, "no tree carries rank 2's shard"}}) {
    AlgoOptions opt;
    opt.forest = bad;
    try {
      build_schedule(*forest, a, 0, 3, opt);
      ADD_FAILURE() << "accepted a forest; wanted '" << what << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
}
