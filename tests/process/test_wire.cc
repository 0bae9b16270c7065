// 16-bit sums and the float32 wire type (WEFT_WIRE_DTYPE) in real processes over shared memory:
// weft-test-wire (process/wire_main.cc) checks every rank's bits against the float32 sum rounded
// once, at 2 and 3 ranks, with the wire type bfloat16, float16 and unset (issue 46). The direct
// path's pieces are off (WEFT_DIRECT_PIECE_BYTES=0) so that large calls take the schedules on any
// machine.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <tuple>

#include "runtime/transport/shm/shm_transport.h"
#include "support/spawn.h"

namespace {

using weft::test::dump;
using weft::test::run_job;

class Wire : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(Wire, SixteenBitSumsRoundOnceAndTheWireTypeApplies) {
  if (!weft::ShmTransport::usable()) GTEST_SKIP() << "cross-memory attach is refused here (kernel.yama.ptrace_scope)";
  const std::string wire = std::get<0>(GetParam());
  std::vector<std::string> env = {"WEFT_TIMEOUT_MS=60000", "WEFT_DIRECT_PIECE_BYTES=0"};
  if (wire != "none") env.push_back("WEFT_WIRE_DTYPE=" + wire);
  auto rs = run_job(std::get<1>(GetParam()), {WEFT_TEST_WIRE, wire}, env, std::chrono::seconds(120));
  for (const auto& r : rs) {
    EXPECT_EQ(r.status, 0) << dump(rs);
    EXPECT_TRUE(std::regex_search(r.output, std::regex("rank \\d+: OK \\d+ calls"))) << dump(rs);
  }
}
INSTANTIATE_TEST_SUITE_P(Types, Wire,
                         ::testing::Combine(::testing::Values("bfloat16", "float16", "none"), ::testing::Values(2, 3)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// A wire type that is not one: refused by name when the communicator is made.
TEST(WireConfig, UnknownWireTypeIsRefusedByName) {
  auto rs = run_job(2, {WEFT_TEST_WIRE, "none"}, {"WEFT_WIRE_DTYPE=int8"}, std::chrono::seconds(60));
  for (const auto& r : rs) {
    EXPECT_NE(r.status, 0) << dump(rs);
    EXPECT_NE(r.output.find("WEFT_WIRE_DTYPE='int8' is not bfloat16, float16 or float32"), std::string::npos) << dump(rs);
  }
}

}  // namespace
