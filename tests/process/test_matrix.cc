// Every collective x type x op in real processes, over the shared-memory transport and over UCX,
// at 2 to 5 ranks (tests/process/matrix_main.cc says which cases). Each job asserts which
// transport carried the bytes from every rank's "communicator ready: ... transport X" line, so
// a sysctl (kernel.yama.ptrace_scope, which decides whether cross-memory attach works) cannot
// silently switch the transport under test: where shared memory cannot run, its cases are
// skipped and say why rather than passing over UCX.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <tuple>

#include "runtime/transport/shm/shm_transport.h"
#include "support/spawn.h"

namespace {

using weft::test::dump;
using weft::test::run_job;


// Runs one job and asserts: every rank exited 0 and printed OK, and its communicator ran over
// `transport` ("shm" or "ucx").
void expect_job(int n, const std::string& transport, const std::string& mode, std::vector<std::string> env) {
  if (transport == "shm" && !weft::ShmTransport::usable())
    GTEST_SKIP() << "cross-memory attach is refused here (kernel.yama.ptrace_scope), so the shared-memory transport cannot run";
  env.push_back("WEFT_TRANSPORT=" + std::string(transport == "shm" ? "auto" : "ucx"));
  env.push_back("WEFT_LOG_LEVEL=info");
  env.push_back("WEFT_TIMEOUT_MS=60000");
  auto rs = run_job(n, {WEFT_TEST_MATRIX, mode}, env, std::chrono::seconds(280));
  for (size_t r = 0; r < rs.size(); ++r) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(rs[r].output, m, std::regex("communicator ready: .* transport (\\S+)"))) << dump(rs);
    EXPECT_EQ(m[1].str(), transport) << dump(rs);
    EXPECT_EQ(rs[r].status, 0) << dump(rs);
    ASSERT_TRUE(std::regex_search(rs[r].output, m, std::regex("rank \\d+: OK (\\d+) calls"))) << dump(rs);
    if (r == 0) std::printf("[ figure ] %s %d ranks %s: %s calls in %.1f s\n", transport.c_str(), n, mode.c_str(), m[1].str().c_str(), rs[r].seconds);
  }
}

class Matrix : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(Matrix, EveryCollectiveTypeAndOpInRealProcesses) {
  expect_job(std::get<1>(GetParam()), std::get<0>(GetParam()), "full", {});
}
INSTANTIATE_TEST_SUITE_P(Transports, Matrix,
                         ::testing::Combine(::testing::Values("shm", "ucx"), ::testing::Values(2, 3, 4, 5)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// The direct path's all-reduce in pieces (the default only where ranks outnumber cores), forced
// so that it runs in real processes on any machine: 64 KiB pieces past a 32 KiB one-round limit.
TEST(MatrixPieces, EveryCollectiveTypeAndOpWithPiecewiseDirectAllReduce) {
  expect_job(3, "shm", "full", {"WEFT_DIRECT_BYTES=32768", "WEFT_DIRECT_PIECE_BYTES=65536"});
}

// Deterministic mode (issue 47) with the direct path off: every reduction runs the "det" schedules
// (rank-order fold at each block's owner), checked for every type, op, root and placement.
TEST(MatrixDeterministic, EveryCollectiveTypeAndOpWithTheDeterministicSchedules) {
  expect_job(3, "shm", "full", {"WEFT_DETERMINISTIC=1", "WEFT_DIRECT_BYTES=0"});
}

// The same matrix on weftMemAlloc buffers (windows, WEFT_TEST_SHARED=1): the latency
// path and the window all-reduce read and write them directly, in real processes (issue 44).
class MatrixShared : public ::testing::TestWithParam<int> {};
TEST_P(MatrixShared, EveryCollectiveTypeAndOpOnWindows) {
  expect_job(GetParam(), "shm", "full", {"WEFT_TEST_SHARED=1"});
}
INSTANTIATE_TEST_SUITE_P(Ranks, MatrixShared, ::testing::Values(2, 3, 5),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// Slices of 4 MiB: one step's message passes the 1 MiB staging chunk, so the shared-memory
// transport reduces from a cross-process read through its bounce buffer.
class MatrixLarge : public ::testing::TestWithParam<std::tuple<const char*, int>> {};
TEST_P(MatrixLarge, ReducingCollectivesWithMessagesPastTheStagingChunk) {
  expect_job(std::get<1>(GetParam()), std::get<0>(GetParam()), "large", {"WEFT_SLICE_BYTES=4194304"});
}
INSTANTIATE_TEST_SUITE_P(Transports, MatrixLarge,
                         ::testing::Values(std::make_tuple("shm", 2), std::make_tuple("shm", 3), std::make_tuple("ucx", 2)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });

}  // namespace
