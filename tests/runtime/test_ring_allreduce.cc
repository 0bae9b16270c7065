// Ring all-reduce (float32) across thread-ranks over both transports, against an independent
// reference: inputs are small integers so every partial sum is exact in float32, and the
// reference is summed in int64.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "support/multirank.h"

using namespace weft;
using weft::test::run_ranks;

namespace {

float input(int rank, uint64_t i) { return static_cast<float>(static_cast<int>((i * 7 + rank * 13) % 101) - 50); }

struct Case {
  TransportKind transport;
  int ranks;
  uint64_t count;
};

class RingAllReduce : public ::testing::TestWithParam<Case> {};

TEST_P(RingAllReduce, SumAndAvgMatchReference) {
  const Case c = GetParam();
  run_ranks(c.ranks, c.transport, [&](Communicator& comm) {
    std::vector<float> send(c.count), recv(c.count + 16, -777.0f), inplace(c.count);
    for (uint64_t i = 0; i < c.count; ++i) send[i] = inplace[i] = input(comm.rank(), i);
    CollectiveArgs a;
    a.count = c.count;
    a.dtype = DataType::kFloat32;
    a.op = RedOp::kSum;
    comm.submit(a, send.data(), recv.data());
    comm.submit(a, inplace.data(), inplace.data());
    for (uint64_t i = 0; i < c.count; ++i) {
      int64_t ref = 0;
      for (int r = 0; r < c.ranks; ++r) ref += static_cast<int64_t>(input(r, i));
      ASSERT_EQ(recv[i], static_cast<float>(ref)) << "rank " << comm.rank() << " element " << i;
      ASSERT_EQ(inplace[i], static_cast<float>(ref)) << "in place, rank " << comm.rank() << " element " << i;
    }
    for (int k = 0; k < 16; ++k) ASSERT_EQ(recv[c.count + k], -777.0f) << "wrote past the end";
    a.op = RedOp::kAvg;
    comm.submit(a, send.data(), recv.data());
    for (uint64_t i = 0; i < c.count; ++i) {
      double ref = 0;
      for (int r = 0; r < c.ranks; ++r) ref += input(r, i);
      ASSERT_EQ(recv[i], static_cast<float>(ref) / static_cast<float>(c.ranks)) << "avg element " << i;
    }
  });
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (auto t : {TransportKind::kInproc, TransportKind::kUcx, TransportKind::kShm}) {
    for (int n = 1; n <= 8; ++n) {
      for (uint64_t count : {0ull, 1ull, 2ull, 7ull, 13ull, 1009ull, (1ull << 20) + 3}) {
        if (t != TransportKind::kInproc && n > 4 && count > 2000) continue;  // keep these runs short
        out.push_back({t, n, count});
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, RingAllReduce, ::testing::ValuesIn(cases()), [](const auto& info) {
  return std::string(weft::test::transport_label(info.param.transport)) + "_n" + std::to_string(info.param.ranks) +
         "_c" + std::to_string(info.param.count);
});

TEST(RingAllReduce, LargeBufferManyIterations) {
  // Tens of MiB, repeated, over UCX between thread-ranks.
  const uint64_t count = 12u << 20;  // 48 MiB of float32
  run_ranks(2, TransportKind::kUcx, [&](Communicator& comm) {
    std::vector<float> buf(count);
    for (int it = 0; it < 3; ++it) {
      for (uint64_t i = 0; i < count; ++i) buf[i] = input(comm.rank(), i + it);
      CollectiveArgs a;
      a.count = count;
      comm.submit(a, buf.data(), buf.data());
      for (uint64_t i = 0; i < count; i += 4099) ASSERT_EQ(buf[i], input(0, i + it) + input(1, i + it));
    }
  });
}

}  // namespace
