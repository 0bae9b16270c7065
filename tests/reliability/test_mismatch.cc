// Mismatched arguments across ranks (count, type, op, root, collective kind), thread-ranks over the
// in-process transport and over UCX. Rank 1 calls with one field changed. Every rank must end
// with an error (from the call itself, or from the next call when its part of the call could
// finish before the mismatch was seen) that names the field: the rank that detected the mismatch
// says so itself (weftInvalidUsage, "mismatch with rank ..."), the others get its message through
// the store (weftRemoteError, "rank R failed: ...").
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <vector>

#include "support/multirank.h"

using namespace weft;
using namespace weft::test;

namespace {

struct Outcome {
  ErrorCode code = ErrorCode::kSuccess;
  std::string message;
  double ms = 0;
};

struct MismatchCase {
  const char* name;
  const char* field;  // the words every rank's message must contain
  CollectiveArgs base, changed;
};

std::vector<Outcome> run_mismatch(TransportKind transport, const MismatchCase& mc, int n) {
  std::vector<Outcome> out(n);
  CommConfig cfg = test_config();
  cfg.timeout = std::chrono::milliseconds(5000);
  run_ranks(
      n, transport,
      [&](Communicator& comm) {
        const int r = comm.rank();
        CollectiveArgs a = r == 1 ? mc.changed : mc.base;
        std::vector<uint8_t> send(a.count * 8 * n + 64, 1), recv(a.count * 8 * n + 64, 0);
        auto t0 = std::chrono::steady_clock::now();
        try {
          comm.submit(a, send.data(), recv.data());
          // This rank's part could finish (e.g. it only sent): the next call must fail.
          comm.submit(CollectiveArgs{CollectiveKind::kBarrier, 0, DataType::kUint8, RedOp::kSum, 0, false}, nullptr,
                      nullptr);
          out[r].message = "no error";
        } catch (const Error& e) {
          out[r].code = e.code();
          out[r].message = e.what();
        }
        out[r].ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        // Never half-broken: after the error every call fails fast with the cause.
        if (out[r].code != ErrorCode::kSuccess) {
          EXPECT_TRUE(comm.broken()) << "rank " << r;
          try {
            comm.submit(a, send.data(), recv.data());
            ADD_FAILURE() << "rank " << r << ": a call on a broken communicator succeeded";
          } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::kRemoteError) << e.what();
            EXPECT_NE(std::string(e.what()).find("broken"), std::string::npos) << e.what();
          }
        }
      },
      cfg);
  return out;
}

CollectiveArgs args(CollectiveKind k, uint64_t count, DataType dt, RedOp op, int root) {
  return CollectiveArgs{k, count, dt, op, root, false};
}

const MismatchCase kCases[] = {
    {"count", "the count", args(CollectiveKind::kAllReduce, 30011, DataType::kFloat32, RedOp::kSum, 0),
     args(CollectiveKind::kAllReduce, 30012, DataType::kFloat32, RedOp::kSum, 0)},
    {"datatype", "the data type", args(CollectiveKind::kAllReduce, 30011, DataType::kFloat32, RedOp::kSum, 0),
     args(CollectiveKind::kAllReduce, 30011, DataType::kInt32, RedOp::kSum, 0)},
    {"op", "the reduction op", args(CollectiveKind::kAllReduce, 30011, DataType::kFloat32, RedOp::kSum, 0),
     args(CollectiveKind::kAllReduce, 30011, DataType::kFloat32, RedOp::kMax, 0)},
    {"root", "the root", args(CollectiveKind::kReduce, 30011, DataType::kFloat32, RedOp::kSum, 0),
     args(CollectiveKind::kReduce, 30011, DataType::kFloat32, RedOp::kSum, 2)},
    {"kind", "the collective", args(CollectiveKind::kAllReduce, 30011, DataType::kFloat32, RedOp::kSum, 0),
     args(CollectiveKind::kReduceScatter, 30011, DataType::kFloat32, RedOp::kSum, 0)},
};

class Mismatch : public ::testing::TestWithParam<std::tuple<TransportKind, int>> {};

TEST_P(Mismatch, EveryRankGetsAnErrorNamingTheField) {
  const auto [transport, index] = GetParam();
  const MismatchCase& mc = kCases[index];
  const int n = 3;
  auto out = run_mismatch(transport, mc, n);
  int detectors = 0;
  for (int r = 0; r < n; ++r) {
    const Outcome& o = out[r];
    SCOPED_TRACE(fmt::format("{} {} rank {}: code {} after {:.0f} ms: {}", transport_label(transport), mc.name, r,
                             static_cast<int>(o.code), o.ms, o.message));
    ASSERT_NE(o.code, ErrorCode::kSuccess);
    const bool timed_out = o.code == ErrorCode::kTimeout ||
                           (o.code == ErrorCode::kRemoteError && o.message.find("timed out") != std::string::npos);
    if (transport == TransportKind::kInproc && std::string(mc.name) == "root" && timed_out) {
      // Known gap (docs/RELIABILITY.md): the in-process transport completes sends eagerly, so the
      // ranks whose part is only sending move on to their next call and never stall in the same
      // call as the root; the signature exchange cannot compare them, and the root times out. The
      // others time out too, or (when slowed down, as under ThreadSanitizer) learn of the root's
      // timeout through the store just before their own.
      EXPECT_NE(o.message.find("waiting for rank"), std::string::npos);
      std::printf("[ figure ] mismatch %s %s rank %d: timeout after %.0f ms (known gap)\n", transport_label(transport),
                  mc.name, r, o.ms);
      continue;
    }
    EXPECT_TRUE(o.code == ErrorCode::kInvalidUsage || o.code == ErrorCode::kRemoteError);
    EXPECT_NE(o.message.find(mc.field), std::string::npos) << "the message does not name " << mc.field;
    if (o.code == ErrorCode::kInvalidUsage) {
      ++detectors;
      EXPECT_NE(o.message.find("mismatch with rank"), std::string::npos);
    } else {
      EXPECT_NE(o.message.find("failed:"), std::string::npos) << "not the propagated message";
    }
    EXPECT_LT(o.ms, 4000.0) << "not detected before the timeout";
    std::printf("[ figure ] mismatch %s %s rank %d: %s after %.0f ms\n", transport_label(transport), mc.name, r,
                error_code_name(o.code), o.ms);
  }
  if (!(transport == TransportKind::kInproc && std::string(mc.name) == "root")) {
    EXPECT_GE(detectors, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Fields, Mismatch,
                         ::testing::Combine(::testing::Values(TransportKind::kInproc, TransportKind::kUcx),
                                            ::testing::Range(0, 5)),
                         [](const auto& info) {
                           return std::string(transport_label(std::get<0>(info.param))) + "_" +
                                  kCases[std::get<1>(info.param)].name;
                         });

}  // namespace
