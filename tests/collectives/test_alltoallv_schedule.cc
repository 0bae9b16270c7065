// The all-to-all with unequal splits (kAllToAllv) at the schedule level: every rank's schedule
// together in the simulator (schedule_sim.h), no transport involved. Part of test_algorithms.
#include <gtest/gtest.h>

#include <memory>

#include "collectives/algorithms/builtin.h"
#include "collectives/collective.h"
#include "runtime/base/error.h"
#include "schedule_sim.h"

using namespace weft;
using namespace weft::test;

namespace {

// All-to-all with unequal splits: every rank's schedule together in the simulator, counts of zero,
// one, odd and prime sizes, blocks laid out in reverse order with gaps; each received block checked
// byte by byte and the gaps left untouched. Every ordered pair exchanges exactly one message (zero
// bytes for a zero count), so a count two ranks disagree on always shows as a size mismatch.
TEST(AllToAllv, UnequalSplitsInTheSimulator) {
  const Algorithm* algo = find_algorithm("pairwise", CollectiveKind::kAllToAllv);
  ASSERT_NE(algo, nullptr);
  auto count = [](int seed, int src, int dst) -> uint64_t {
    static const uint64_t counts[] = {0, 1, 2, 3, 7, 13, 97, 1009};
    return counts[(seed * 7 + src * 5 + dst * 3 + src * dst) % 8];
  };
  auto byte = [](int src, int dst, size_t i) { return static_cast<uint8_t>(src * 31 + dst * 7 + i * 13 + 1); };
  for (int n : {1, 2, 3, 4, 5, 7}) {
    for (DataType dt : {DataType::kInt8, DataType::kFloat16, DataType::kFloat32, DataType::kFloat64}) {
      for (int seed = 0; seed < 4; ++seed) {
        const uint64_t es = dtype_size(dt);
        std::vector<std::vector<uint8_t>> send(n), recv(n);
        std::vector<CollectiveArgs> args(n);
        std::vector<Schedule> scheds;
        std::vector<SimRank> sim;
        for (int r = 0; r < n; ++r) {
          auto s = std::make_shared<AllToAllvSplits>();
          uint64_t sat = 0, rat = 0;
          for (int p = n - 1; p >= 0; --p) {  // reverse order, a gap of one element after each block
            s->send_counts.insert(s->send_counts.begin(), count(seed, r, p));
            s->recv_counts.insert(s->recv_counts.begin(), count(seed, p, r));
            s->send_displs.insert(s->send_displs.begin(), sat);
            s->recv_displs.insert(s->recv_displs.begin(), rat);
            sat += s->send_counts.front() + 1;
            rat += s->recv_counts.front() + 1;
          }
          send[r].assign(sat * es, 0);
          recv[r].assign(rat * es, 0xee);
          for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < s->send_counts[p] * es; ++i) send[r][s->send_displs[p] * es + i] = byte(r, p, i);
          args[r].kind = CollectiveKind::kAllToAllv;
          args[r].dtype = dt;
          args[r].count = s->sent();
          args[r].splits = s;
          scheds.push_back(build_schedule(*algo, args[r], r, n, AlgoOptions{}));
          EXPECT_EQ(scheds.back().steps.size(), static_cast<size_t>(2 * (n - 1) + (s->send_counts[r] ? 1 : 0)));
          sim.push_back({send[r].data(), recv[r].data()});
        }
        ASSERT_EQ(simulate(scheds, sim, static_cast<uint64_t>(seed + 1)), "") << n << " ranks, seed " << seed;
        for (int r = 0; r < n; ++r) {
          std::vector<uint8_t> want(recv[r].size(), 0xee);
          const AllToAllvSplits& s = *args[r].splits;
          for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < s.recv_counts[p] * es; ++i) want[s.recv_displs[p] * es + i] = byte(p, r, i);
          ASSERT_EQ(recv[r], want) << "rank " << r << " of " << n << ", seed " << seed;
        }
      }
    }
  }
  // Without its counts the build refuses.
  CollectiveArgs bare;
  bare.kind = CollectiveKind::kAllToAllv;
  EXPECT_THROW(build_schedule(*algo, bare, 0, 2, AlgoOptions{}), Error);
}

}  // namespace
