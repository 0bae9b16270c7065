// Bad arguments through every function of the C API: each returns weftInvalidArgument or
// weftInvalidUsage with a message (weftGetLastErrorMessage, and weftCommGetLastError when the
// communicator is live) and writes nothing: every buffer is framed by guard zones and checked.
// The communicator is a one-rank world bootstrapped from WEFT_* variables (UCX).
#include <gtest/gtest.h>
#include <weft/weft.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "support/spawn.h"

namespace {

constexpr size_t kGuard = 256;
constexpr size_t kElems = 64;

// A buffer of kElems float64 with guard zones on both sides; intact() checks everything.
struct Guarded {
  std::vector<uint8_t> mem = std::vector<uint8_t>(kElems * 8 + 2 * kGuard);
  std::vector<uint8_t> image;
  Guarded() {
    for (size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<uint8_t>(0x5A ^ (i * 13));
    image = mem;
  }
  void* p() { return mem.data() + kGuard; }
  bool intact() const { return mem == image; }
};

class CApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("WEFT_RANK", "0", 1);
    setenv("WEFT_WORLD_SIZE", "1", 1);
    setenv("WEFT_MASTER_ADDR", "127.0.0.1", 1);
    setenv("WEFT_MASTER_PORT", std::to_string(weft::test::free_port()).c_str(), 1);
    setenv("WEFT_JOB_SECRET", "c-api-test", 1);
    setenv("WEFT_TIMEOUT_MS", "5000", 1);
    ASSERT_EQ(weftCommInitFromEnv(&comm_), weftSuccess) << weftGetLastErrorMessage();
  }
  static void TearDownTestSuite() {
    if (comm_) weftCommDestroy(comm_);
    comm_ = nullptr;
  }
  static weftComm_t comm_;
};
weftComm_t CApi::comm_ = nullptr;

// Checks one failing call: its code, a non-empty message naming the function, guard zones.
void expect_rejected(const char* what, weftResult_t got, std::initializer_list<weftResult_t> allowed, Guarded& a,
                     Guarded& b, const char* fn) {
  bool ok = false;
  for (auto r : allowed) ok |= got == r;
  EXPECT_TRUE(ok) << what << ": returned " << got << " (" << weftGetErrorString(got) << ")";
  std::string msg = weftGetLastErrorMessage();
  EXPECT_FALSE(msg.empty()) << what;
  if (fn) {
    EXPECT_NE(msg.find(fn), std::string::npos) << what << ": message '" << msg << "' does not name " << fn;
  }
  EXPECT_TRUE(a.intact()) << what << ": wrote into the send buffer or its guards";
  EXPECT_TRUE(b.intact()) << what << ": wrote into the receive buffer or its guards";
}

constexpr auto kArg = weftInvalidArgument;
constexpr auto kUse = weftInvalidUsage;
const auto kBadType = static_cast<weftDataType_t>(weftNumTypes);
const auto kNegType = static_cast<weftDataType_t>(-1);
const auto kBadOp = static_cast<weftRedOp_t>(weftNumOps);
constexpr size_t kHuge = SIZE_MAX / 2;

TEST_F(CApi, NullCommunicatorEverywhere) {
  Guarded a, b;
  weftRequest_t req = nullptr;
  int x = 0, y = 0;
  const auto f32 = weftFloat32;
  const size_t v1[] = {1}, v0[] = {0};  // weftAllToAllv's arrays, one entry per rank
  struct Call {
    const char* name;
    std::function<weftResult_t()> call;
  };
  std::vector<Call> calls = {
      {"weftCommRank", [&] { return weftCommRank(nullptr, &x); }},
      {"weftCommCount", [&] { return weftCommCount(nullptr, &x); }},
      {"weftCommLocalRank", [&] { return weftCommLocalRank(nullptr, &x); }},
      {"weftCommLocalCount", [&] { return weftCommLocalCount(nullptr, &x); }},
      {"weftCommNode", [&] { return weftCommNode(nullptr, &x, &y); }},
      {"weftCommAbort", [&] { return weftCommAbort(nullptr); }},
      {"weftCommDestroy", [&] { return weftCommDestroy(nullptr); }},
      {"weftCommSplit", [&] { weftComm_t n; return weftCommSplit(nullptr, 0, 0, &n); }},
      {"weftCommSplitLevel", [&] { weftComm_t n; return weftCommSplitLevel(nullptr, weftLevelNode, &n); }},
      {"weftCommSetAlgorithm", [&] { return weftCommSetAlgorithm(nullptr, "ring"); }},
      {"weftCommShrink", [&] { weftComm_t n; return weftCommShrink(nullptr, nullptr, 0, &n); }},
      {"weftCommSetDeterministic", [&] { return weftCommSetDeterministic(nullptr, 1); }},
      {"weftCommGetDeterministic", [&] { return weftCommGetDeterministic(nullptr, &x); }},
      {"weftAllReduceShards", [&] { return weftAllReduceShards(a.p(), b.p(), 1, 1, f32, weftSum, nullptr); }},
      {"weftCommGetFailedRanks", [&] { return weftCommGetFailedRanks(nullptr, &x, &y); }},
      {"weftAllReduce", [&] { return weftAllReduce(a.p(), b.p(), kElems, f32, weftSum, nullptr); }},
      {"weftAllReduceAsync", [&] { return weftAllReduceAsync(a.p(), b.p(), kElems, f32, weftSum, nullptr, &req); }},
      {"weftReduceScatter", [&] { return weftReduceScatter(a.p(), b.p(), 1, f32, weftSum, nullptr); }},
      {"weftReduceScatterAsync", [&] { return weftReduceScatterAsync(a.p(), b.p(), 1, f32, weftSum, nullptr, &req); }},
      {"weftAllGather", [&] { return weftAllGather(a.p(), b.p(), 1, f32, nullptr); }},
      {"weftAllGatherAsync", [&] { return weftAllGatherAsync(a.p(), b.p(), 1, f32, nullptr, &req); }},
      {"weftBroadcast", [&] { return weftBroadcast(a.p(), b.p(), 1, f32, 0, nullptr); }},
      {"weftBroadcastAsync", [&] { return weftBroadcastAsync(a.p(), b.p(), 1, f32, 0, nullptr, &req); }},
      {"weftReduce", [&] { return weftReduce(a.p(), b.p(), 1, f32, weftSum, 0, nullptr); }},
      {"weftReduceAsync", [&] { return weftReduceAsync(a.p(), b.p(), 1, f32, weftSum, 0, nullptr, &req); }},
      {"weftAllToAll", [&] { return weftAllToAll(a.p(), b.p(), 1, f32, nullptr); }},
      {"weftAllToAllAsync", [&] { return weftAllToAllAsync(a.p(), b.p(), 1, f32, nullptr, &req); }},
      {"weftAllToAllv", [&] { return weftAllToAllv(a.p(), v1, v0, b.p(), v1, v0, f32, nullptr); }},
      {"weftAllToAllvAsync", [&] { return weftAllToAllvAsync(a.p(), v1, v0, b.p(), v1, v0, f32, nullptr, &req); }},
      {"weftBarrier", [&] { return weftBarrier(nullptr); }},
      {"weftBarrierAsync", [&] { return weftBarrierAsync(nullptr, &req); }},
      {"weftSend", [&] { return weftSend(a.p(), 1, f32, 0, nullptr); }},
      {"weftSendAsync", [&] { return weftSendAsync(a.p(), 1, f32, 0, nullptr, &req); }},
      {"weftRecv", [&] { return weftRecv(b.p(), 1, f32, 0, nullptr); }},
      {"weftRecvAsync", [&] { return weftRecvAsync(b.p(), 1, f32, 0, nullptr, &req); }},
  };
  for (auto& c : calls) {
    expect_rejected(c.name, c.call(), {kArg}, a, b, c.name);
    EXPECT_EQ(req, nullptr) << c.name;
  }
  EXPECT_STREQ(weftCommGetLastError(nullptr), "not a live communicator");
}

TEST_F(CApi, NullOutputsAndNullRequests) {
  Guarded a, b;
  expect_rejected("version", weftGetVersion(nullptr), {kArg}, a, b, "weftGetVersion");
  expect_rejected("rank", weftCommRank(comm_, nullptr), {kArg}, a, b, "weftCommRank");
  expect_rejected("count", weftCommCount(comm_, nullptr), {kArg}, a, b, "weftCommCount");
  expect_rejected("local rank", weftCommLocalRank(comm_, nullptr), {kArg}, a, b, "weftCommLocalRank");
  expect_rejected("local count", weftCommLocalCount(comm_, nullptr), {kArg}, a, b, "weftCommLocalCount");
  int x;
  expect_rejected("node", weftCommNode(comm_, &x, nullptr), {kArg}, a, b, "weftCommNode");
  expect_rejected("init", weftCommInitFromEnv(nullptr), {kArg}, a, b, "weftCommInitFromEnv");
  expect_rejected("split", weftCommSplit(comm_, 0, 0, nullptr), {kArg}, a, b, "weftCommSplit");
  expect_rejected("split level", weftCommSplitLevel(comm_, weftLevelRail, nullptr), {kArg}, a, b, "weftCommSplitLevel");
  weftComm_t lvl = nullptr;
  expect_rejected("bad level", weftCommSplitLevel(comm_, weftNumLevels, &lvl), {kArg}, a, b, "weftCommSplitLevel");
  EXPECT_EQ(lvl, nullptr);
  expect_rejected("wait", weftWait(nullptr, 0), {kArg}, a, b, "weftWait");
  expect_rejected("test", weftTest(nullptr, &x), {kArg, kUse}, a, b, "weftTest");
  expect_rejected("test done", weftTest(nullptr, nullptr), {kArg}, a, b, "weftTest");
  const auto f = weftFloat32;
  expect_rejected("ar", weftAllReduceAsync(a.p(), b.p(), 1, f, weftSum, comm_, nullptr), {kArg}, a, b, "request is NULL");
  expect_rejected("rs", weftReduceScatterAsync(a.p(), b.p(), 1, f, weftSum, comm_, nullptr), {kArg}, a, b, "request is NULL");
  expect_rejected("ag", weftAllGatherAsync(a.p(), b.p(), 1, f, comm_, nullptr), {kArg}, a, b, "request is NULL");
  expect_rejected("bc", weftBroadcastAsync(a.p(), b.p(), 1, f, 0, comm_, nullptr), {kArg}, a, b, "request is NULL");
  expect_rejected("rd", weftReduceAsync(a.p(), b.p(), 1, f, weftSum, 0, comm_, nullptr), {kArg}, a, b, "request is NULL");
  expect_rejected("a2a", weftAllToAllAsync(a.p(), b.p(), 1, f, comm_, nullptr), {kArg}, a, b, "request is NULL");
  const size_t v1[] = {1}, v0[] = {0};
  expect_rejected("a2av", weftAllToAllvAsync(a.p(), v1, v0, b.p(), v1, v0, f, comm_, nullptr), {kArg}, a, b, "request is NULL");
  expect_rejected("bar", weftBarrierAsync(comm_, nullptr), {kArg}, a, b, "request is NULL");
  expect_rejected("send", weftSendAsync(a.p(), 1, f, 0, comm_, nullptr), {kArg}, a, b, "request is NULL");
  expect_rejected("recv", weftRecvAsync(b.p(), 1, f, 0, comm_, nullptr), {kArg}, a, b, "request is NULL");
  EXPECT_NE(std::string(weftCommGetLastError(comm_)), "");
  EXPECT_STRNE(weftGetErrorString(static_cast<weftResult_t>(99)), "");
}

TEST_F(CApi, NullBuffersBadEnumsOverflowAndRanges) {
  Guarded a, b;
  weftRequest_t req = nullptr;
  const auto f = weftFloat32;
  const size_t v0[] = {0}, v1[] = {1}, v4[] = {4}, vhuge[] = {SIZE_MAX / 8};  // weftAllToAllv's, one rank
  struct Case {
    const char* what;
    std::function<weftResult_t()> call;
    const char* words;
  };
  std::vector<Case> cases = {
      {"null send", [&] { return weftAllReduce(nullptr, b.p(), kElems, f, weftSum, comm_); }, "sendbuff is NULL"},
      {"null recv", [&] { return weftAllReduce(a.p(), nullptr, kElems, f, weftSum, comm_); }, "recvbuff is NULL"},
      {"null async", [&] { return weftAllReduceAsync(a.p(), nullptr, 3, f, weftSum, comm_, &req); }, "recvbuff is NULL"},
      {"rs null", [&] { return weftReduceScatter(nullptr, b.p(), 4, f, weftSum, comm_); }, "NULL"},
      {"ag null", [&] { return weftAllGather(a.p(), nullptr, 4, f, comm_); }, "NULL"},
      {"bc null", [&] { return weftBroadcast(nullptr, b.p(), 4, f, 0, comm_); }, "NULL"},
      {"rd null", [&] { return weftReduce(a.p(), nullptr, 4, f, weftSum, 0, comm_); }, "NULL"},
      {"a2a null", [&] { return weftAllToAll(nullptr, b.p(), 4, f, comm_); }, "NULL"},
      {"a2av null", [&] { return weftAllToAllv(nullptr, v4, v0, b.p(), v4, v0, f, comm_); }, "sendbuff is NULL"},
      {"a2av counts", [&] { return weftAllToAllv(a.p(), nullptr, v0, b.p(), v4, v0, f, comm_); }, "sendcounts is NULL"},
      {"a2av displs", [&] { return weftAllToAllvAsync(a.p(), v4, v0, b.p(), v4, nullptr, f, comm_, &req); }, "rdispls is NULL"},
      {"a2av own", [&] { return weftAllToAllv(a.p(), v4, v0, b.p(), v1, v0, f, comm_); }, "block to itself"},
      {"a2av in place", [&] { return weftAllToAllv(a.p(), v4, v0, a.p(), v4, v0, f, comm_); }, "in place is not supported"},
      {"a2av overflow", [&] { return weftAllToAllv(a.p(), vhuge, v0, b.p(), vhuge, v0, f, comm_); }, "overflow"},
      {"type", [&] { return weftAllReduce(a.p(), b.p(), 4, kBadType, weftSum, comm_); }, "datatype"},
      {"neg type", [&] { return weftAllGather(a.p(), b.p(), 4, kNegType, comm_); }, "datatype"},
      {"bc type", [&] { return weftBroadcast(a.p(), b.p(), 4, kBadType, 0, comm_); }, "datatype"},
      {"send type", [&] { return weftSend(a.p(), 4, kBadType, 0, comm_); }, "datatype"},
      {"op", [&] { return weftAllReduce(a.p(), b.p(), 4, f, kBadOp, comm_); }, "op"},
      {"neg op", [&] { return weftReduce(a.p(), b.p(), 4, f, static_cast<weftRedOp_t>(-3), 0, comm_); }, "op"},
      {"rs op", [&] { return weftReduceScatter(a.p(), b.p(), 4, f, kBadOp, comm_); }, "op"},
      {"overflow", [&] { return weftAllReduce(a.p(), b.p(), kHuge, f, weftSum, comm_); }, "overflow"},
      {"overflow max", [&] { return weftAllReduce(a.p(), b.p(), SIZE_MAX, weftFloat64, weftSum, comm_); }, "overflow"},
      {"ag overflow", [&] { return weftAllGather(a.p(), b.p(), kHuge, f, comm_); }, "overflow"},
      {"a2a overflow", [&] { return weftAllToAll(a.p(), b.p(), SIZE_MAX / 8, f, comm_); }, "overflow"},
      {"root", [&] { return weftBroadcast(a.p(), b.p(), 4, f, 1, comm_); }, "root 1"},
      {"neg root", [&] { return weftReduce(a.p(), b.p(), 4, f, weftSum, -1, comm_); }, "root -1"},
      {"root async", [&] { return weftBroadcastAsync(a.p(), b.p(), 4, f, 5, comm_, &req); }, "root 5"},
      {"peer", [&] { return weftSend(a.p(), 4, f, 1, comm_); }, "peer 1"},
      {"neg peer", [&] { return weftRecv(b.p(), 4, f, -1, comm_); }, "peer -1"},
      {"self peer", [&] { return weftSend(a.p(), 4, f, 0, comm_); }, "this rank"},
      {"overlap", [&] { return weftAllReduce(a.p(), static_cast<uint8_t*>(a.p()) + 4, 4, f, weftSum, comm_); }, "overlap"},
  };
  for (auto& c : cases) {
    weftResult_t r = c.call();
    expect_rejected(c.what, r, {kArg}, a, b, nullptr);
    EXPECT_NE(std::string(weftGetLastErrorMessage()).find(c.words), std::string::npos)
        << c.what << ": '" << weftGetLastErrorMessage() << "'";
    EXPECT_EQ(std::string(weftCommGetLastError(comm_)), std::string(weftGetLastErrorMessage())) << c.what;
    EXPECT_EQ(req, nullptr) << c.what;
  }
  // None of that broke the communicator: a real call works, within the guard zones.
  double* in = static_cast<double*>(a.p());
  for (size_t i = 0; i < kElems; ++i) in[i] = static_cast<double>(i);
  a.image = a.mem;
  ASSERT_EQ(weftAllReduce(a.p(), b.p(), kElems, weftFloat64, weftSum, comm_), weftSuccess) << weftCommGetLastError(comm_);
  EXPECT_TRUE(a.intact());
  EXPECT_EQ(std::memcmp(a.p(), b.p(), kElems * 8), 0);
  EXPECT_EQ(std::memcmp(b.mem.data(), b.image.data(), kGuard), 0) << "front guard written";
  EXPECT_EQ(std::memcmp(b.mem.data() + kGuard + kElems * 8, b.image.data() + kGuard + kElems * 8, kGuard), 0)
      << "back guard written";
}

TEST_F(CApi, RequestWaitedTwiceAndDestroyedCommunicator) {
  Guarded a, b;
  weftRequest_t req = nullptr;
  ASSERT_EQ(weftAllReduceAsync(a.p(), b.p(), 8, weftFloat32, weftSum, comm_, &req), weftSuccess);
  ASSERT_NE(req, nullptr);
  int done = 0;
  EXPECT_EQ(weftTest(req, &done), weftSuccess);
  EXPECT_EQ(weftWait(req, -1), weftSuccess) << weftGetLastErrorMessage();
  EXPECT_EQ(weftWait(req, -1), weftInvalidUsage);
  EXPECT_NE(std::string(weftGetLastErrorMessage()).find("not live"), std::string::npos) << weftGetLastErrorMessage();
  EXPECT_EQ(weftTest(req, &done), weftInvalidUsage);

  // A second communicator (a split of the world), destroyed, then used everywhere.
  weftComm_t sub = nullptr;
  ASSERT_EQ(weftCommSplit(comm_, 0, 0, &sub), weftSuccess) << weftGetLastErrorMessage();
  ASSERT_NE(sub, nullptr);
  ASSERT_EQ(weftCommDestroy(sub), weftSuccess);
  Guarded c, d;
  int x;
  EXPECT_EQ(weftCommDestroy(sub), weftInvalidUsage);
  EXPECT_NE(std::string(weftGetLastErrorMessage()).find("not a live communicator"), std::string::npos);
  EXPECT_EQ(weftCommRank(sub, &x), weftInvalidUsage);
  EXPECT_EQ(weftCommAbort(sub), weftInvalidUsage);
  EXPECT_EQ(weftAllReduce(c.p(), d.p(), 8, weftFloat32, weftSum, sub), weftInvalidUsage);
  EXPECT_EQ(weftBarrierAsync(sub, &req), weftInvalidUsage);
  EXPECT_EQ(req, nullptr);
  EXPECT_STREQ(weftCommGetLastError(sub), "not a live communicator");
  EXPECT_TRUE(c.intact() && d.intact());
  // A negative color gives no communicator.
  EXPECT_EQ(weftCommSplit(comm_, -1, 0, &sub), weftSuccess);
  EXPECT_EQ(sub, nullptr);
}

// weftCommShrink and weftCommGetFailedRanks: NULL outputs, bad lists (checked on this rank before
// anything is sent), a destroyed communicator, and the shrunk one, which can only be destroyed.
TEST_F(CApi, ShrinkArgumentsAndTheShrunkCommunicator) {
  Guarded a, b;
  weftComm_t sub = nullptr, shrunk = nullptr;
  ASSERT_EQ(weftCommSplit(comm_, 0, 0, &sub), weftSuccess) << weftGetLastErrorMessage();
  expect_rejected("newcomm NULL", weftCommShrink(sub, nullptr, 0, nullptr), {kArg}, a, b, "weftCommShrink");
  expect_rejected("count NULL", weftCommGetFailedRanks(sub, nullptr, nullptr), {kArg}, a, b, "weftCommGetFailedRanks");
  const int self = 0, out_of_range = 1, negative = -1;
  const std::vector<std::pair<const char*, std::function<weftResult_t()>>> bad = {
      {"negative count", [&] { return weftCommShrink(sub, &out_of_range, -1, &shrunk); }},
      {"NULL list with a count", [&] { return weftCommShrink(sub, nullptr, 2, &shrunk); }},
      {"out of range", [&] { return weftCommShrink(sub, &out_of_range, 1, &shrunk); }},
      {"negative rank", [&] { return weftCommShrink(sub, &negative, 1, &shrunk); }},
      {"this rank", [&] { return weftCommShrink(sub, &self, 1, &shrunk); }},
  };
  for (const auto& [what, call] : bad) {
    expect_rejected(what, call(), {kArg}, a, b, "weftCommShrink");
    EXPECT_EQ(shrunk, nullptr) << what;
  }
  int failed[1] = {-7}, count = -7;
  ASSERT_EQ(weftCommGetFailedRanks(sub, failed, &count), weftSuccess) << weftGetLastErrorMessage();
  EXPECT_EQ(count, 0);
  EXPECT_EQ(failed[0], -7) << "wrote past the count";
  // NULL on a healthy one-rank communicator: the same rank, a new communicator that works.
  ASSERT_EQ(weftCommShrink(sub, nullptr, 0, &shrunk), weftSuccess) << weftGetLastErrorMessage();
  ASSERT_NE(shrunk, nullptr);
  std::vector<float> in(7, 2.5f), out(7, 0.f);
  ASSERT_EQ(weftAllReduce(in.data(), out.data(), in.size(), weftFloat32, weftSum, shrunk), weftSuccess);
  EXPECT_EQ(out, in);
  // The old one: only destroy (and the read-only queries) are left.
  weftComm_t again = nullptr;
  expect_rejected("shrink twice", weftCommShrink(sub, nullptr, 0, &again), {kUse}, a, b, "weftCommShrink");
  EXPECT_NE(std::string(weftGetLastErrorMessage()).find("already shrunk"), std::string::npos) << weftGetLastErrorMessage();
  expect_rejected("collective", weftAllReduce(a.p(), b.p(), 8, weftFloat32, weftSum, sub), {kUse}, a, b, "shrunk");
  expect_rejected("split", weftCommSplit(sub, 0, 0, &again), {kUse}, a, b, "weftCommSplit");
  EXPECT_EQ(again, nullptr);
  EXPECT_EQ(weftCommGetFailedRanks(sub, nullptr, &count), weftSuccess);
  EXPECT_EQ(weftCommDestroy(sub), weftSuccess);
  expect_rejected("destroyed", weftCommShrink(sub, nullptr, 0, &again), {kUse}, a, b, "weftCommShrink");
  expect_rejected("destroyed", weftCommGetFailedRanks(sub, nullptr, &count), {kUse}, a, b, "weftCommGetFailedRanks");
  EXPECT_EQ(weftCommDestroy(shrunk), weftSuccess);
}

TEST_F(CApi, SetAlgorithm) {
  // Unknown names are refused with the known ones listed; known ones, "" and NULL are taken, and
  // the collectives keep working (a one-rank world: the result is the input).
  Guarded a, b;
  EXPECT_EQ(weftCommSetAlgorithm(comm_, "nosuch"), kArg);
  const std::string msg = weftGetLastErrorMessage();
  EXPECT_NE(msg.find("unknown algorithm 'nosuch'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("hier"), std::string::npos) << msg;
  for (const char* name : {"ring", "tree", "rhd", "hier", "chain", "binomial", "", static_cast<const char*>(nullptr)}) {
    ASSERT_EQ(weftCommSetAlgorithm(comm_, name), weftSuccess) << (name ? name : "NULL") << ": " << weftGetLastErrorMessage();
    std::vector<float> in(7, 2.5f), out(7, 0.f);
    ASSERT_EQ(weftAllReduce(in.data(), out.data(), in.size(), weftFloat32, weftSum, comm_), weftSuccess);
    EXPECT_EQ(out, in);
  }
}

TEST_F(CApi, Deterministic) {
  // 0 and 1 only; the mode is reported back and the collectives keep working. Virtual shards: a
  // one-rank world holds any number of them (the whole tree); 0 shards and bad enums are refused.
  Guarded a, b;
  int on = -1;
  EXPECT_EQ(weftCommSetDeterministic(comm_, 2), kArg);
  EXPECT_NE(std::string(weftGetLastErrorMessage()).find("must be 0 or 1 (got 2)"), std::string::npos);
  ASSERT_EQ(weftCommGetDeterministic(comm_, &on), weftSuccess);
  EXPECT_EQ(on, 0);
  ASSERT_EQ(weftCommSetDeterministic(comm_, 1), weftSuccess);
  ASSERT_EQ(weftCommGetDeterministic(comm_, &on), weftSuccess);
  EXPECT_EQ(on, 1);
  expect_rejected("null output", weftCommGetDeterministic(comm_, nullptr), {kArg}, a, b, "weftCommGetDeterministic");
  std::vector<float> in(7, 2.5f), out(7, 0.f);
  ASSERT_EQ(weftAllReduce(in.data(), out.data(), in.size(), weftFloat32, weftSum, comm_), weftSuccess);
  EXPECT_EQ(out, in);
  // Three shards of two elements: (s0 + s1) + s2 by the tree, then / 3 for the average.
  const std::vector<float> shards = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
  std::vector<float> sum(2, 0.f);
  ASSERT_EQ(weftAllReduceShards(shards.data(), sum.data(), 2, 3, weftFloat32, weftAvg, comm_), weftSuccess)
      << weftGetLastErrorMessage();
  EXPECT_EQ(sum, (std::vector<float>{3.f, 4.f}));
  expect_rejected("no shards", weftAllReduceShards(shards.data(), sum.data(), 2, 0, weftFloat32, weftSum, comm_), {kArg}, a,
                  b, "at least 1");
  expect_rejected("bad type", weftAllReduceShards(shards.data(), sum.data(), 2, 3, weftNumTypes, weftSum, comm_), {kArg},
                  a, b, "weftAllReduceShards");
  expect_rejected("null", weftAllReduceShards(nullptr, sum.data(), 2, 3, weftFloat32, weftSum, comm_), {kArg}, a, b,
                  "sendbuff is NULL");
  ASSERT_EQ(weftCommSetDeterministic(comm_, 0), weftSuccess);
}

TEST_F(CApi, ZeroCountWithNullBuffersIsFine) {
  EXPECT_EQ(weftAllReduce(nullptr, nullptr, 0, weftFloat32, weftSum, comm_), weftSuccess) << weftGetLastErrorMessage();
  EXPECT_EQ(weftBroadcast(nullptr, nullptr, 0, weftInt8, 0, comm_), weftSuccess) << weftGetLastErrorMessage();
  EXPECT_EQ(weftBarrier(comm_), weftSuccess);
  int v = 0;
  EXPECT_EQ(weftGetVersion(&v), weftSuccess);
  EXPECT_GT(v, 0);
}

}  // namespace
