// The communicator's state after failures, thread-ranks over inproc and UCX:
//  - an argument error leaves it usable (nothing was sent);
//  - after a remote failure it reports itself broken and every later call fails fast with the
//    original cause (never half-broken);
//  - weftCommAbort from another thread releases every waiting call, blocking and asynchronous.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "runtime/trace/flight_recorder.h"
#include "support/multirank.h"

using namespace weft;
using namespace weft::test;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

CollectiveArgs allreduce(uint64_t count) {
  return CollectiveArgs{CollectiveKind::kAllReduce, count, DataType::kFloat32, RedOp::kSum, 0, false};
}

class CommState : public ::testing::TestWithParam<TransportKind> {};

TEST_P(CommState, UsableAfterAnArgumentError) {
  run_ranks(3, GetParam(), [](Communicator& comm) {
    std::vector<float> buf(1000, 1.0f), out(1000);
    CollectiveArgs bad{CollectiveKind::kBroadcast, 1000, DataType::kFloat32, RedOp::kSum, 7, false};
    EXPECT_THROW(
        try { comm.submit(bad, buf.data(), out.data()); } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
          EXPECT_NE(std::string(e.what()).find("root 7"), std::string::npos) << e.what();
          throw;
        },
        Error);
    EXPECT_THROW(comm.submit(allreduce(1000), nullptr, out.data()), Error);  // null sendbuff
    EXPECT_FALSE(comm.broken());
    comm.submit(allreduce(1000), buf.data(), out.data());
    for (float f : out) ASSERT_EQ(f, 3.0f);
  });
}

TEST_P(CommState, BrokenAfterARemoteFailureEveryCallFailsFastWithTheCause) {
  CommConfig cfg = test_config();
  cfg.timeout = std::chrono::milliseconds(10000);
  run_ranks(
      3, GetParam(),
      [](Communicator& comm) {
        std::vector<float> buf(100000, 1.0f);
        if (comm.rank() == 2) {
          comm.abort();  // this rank fails; the others are waiting for it
          return;
        }
        auto t0 = Clock::now();
        std::string cause;
        try {
          comm.submit(allreduce(buf.size()), buf.data(), buf.data());
          ADD_FAILURE() << "no error";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kRemoteError) << e.what();
          EXPECT_NE(std::string(e.what()).find("rank 2 failed"), std::string::npos) << e.what();
          cause = e.what();
        }
        double first = ms_since(t0);
        EXPECT_LT(first, 5000.0);
        EXPECT_TRUE(comm.broken());
        for (int k = 0; k < 3; ++k) {
          auto t1 = Clock::now();
          try {
            comm.submit(allreduce(buf.size()), buf.data(), buf.data(), k == 2 ? SubmitMode::kAsync : SubmitMode::kBlocking);
            ADD_FAILURE() << "a call on a broken communicator succeeded";
          } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::kRemoteError);
            EXPECT_NE(std::string(e.what()).find("rank 2 failed"), std::string::npos) << "not the original cause: " << e.what();
          }
          EXPECT_LT(ms_since(t1), 50.0) << "a broken communicator must fail fast";
        }
        std::printf("[ figure ] %s rank %d: remote failure seen after %.0f ms\n", comm.transport_name(), comm.rank(), first);
      },
      cfg);
}

TEST_P(CommState, AbortFromAnotherThreadReleasesBlockingAndAsyncCalls) {
  CommConfig cfg = test_config();
  cfg.timeout = std::chrono::milliseconds(30000);
  std::atomic<bool> released{false};
  run_ranks(
      2, GetParam(),
      [&](Communicator& comm) {
        std::vector<std::vector<float>> bufs(3, std::vector<float>(50000, 1.0f));
        if (comm.rank() == 1) {
          // Never enters the collectives; leaves once rank 0 was released (or after 15 s).
          for (int i = 0; i < 1500 && !released.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          return;
        }
        std::vector<std::shared_ptr<Operation>> works;
        for (auto& b : bufs) works.push_back(comm.submit(allreduce(b.size()), b.data(), b.data(), SubmitMode::kAsync));
        auto t0 = Clock::now();
        std::thread aborter([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          comm.abort();
        });
        for (auto& w : works) {
          try {
            w->wait(std::chrono::milliseconds(10000));
          } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::kRemoteError);
            EXPECT_NE(std::string(e.what()).find("abort"), std::string::npos) << e.what();
          }
          EXPECT_TRUE(w->test()) << "an async request still waits after weftCommAbort";
          EXPECT_TRUE(w->failed());
        }
        double ms = ms_since(t0);
        EXPECT_LT(ms, 3000.0);
        EXPECT_THROW(comm.submit(allreduce(10), bufs[0].data(), bufs[0].data()), Error);
        aborter.join();
        released = true;
        std::printf("[ figure ] %s: 3 async calls released %.0f ms after weftCommAbort\n", comm.transport_name(), ms - 200);
      },
      cfg);
}

// The flight recorder's ring keeps the last `capacity` operations, oldest first, with what each
// call's hooks wrote (docs/OBSERVABILITY.md).
TEST(FlightRecorder, RingKeepsTheLastOperationsInOrder) {
  FlightRecorder rec(3);  // rounded up to 4
  ASSERT_EQ(rec.capacity(), 4u);
  const auto t0 = Clock::now();
  for (uint64_t i = 0; i < 10; ++i) {
    CollectiveArgs a;
    a.kind = i % 2 ? CollectiveKind::kBroadcast : CollectiveKind::kAllReduce;
    a.count = 100 + i;
    a.root = static_cast<int>(i % 3);
    if (i == 8) rec.queued(i, i, a, t0);
    rec.started(i, i, a, t0 + std::chrono::microseconds(i), i == 8);
    rec.algorithm(i, "ring");
    if (i < 8) rec.finished(i, t0 + std::chrono::microseconds(i + 1), 0);
  }
  rec.wait_note(9)->note(2, 3, 8);
  const auto snap = rec.snapshot();
  ASSERT_EQ(snap.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(snap[k].record, 6 + k);
    EXPECT_EQ(snap[k].count, 106 + k);
    EXPECT_STREQ(snap[k].algorithm, "ring");
  }
  EXPECT_EQ(snap[0].state, TraceState::kDone);
  EXPECT_EQ(snap[1].kind, CollectiveKind::kBroadcast);
  EXPECT_EQ(snap[1].root, 1);
  EXPECT_EQ(snap[2].state, TraceState::kStarted);  // queued, then started: the queued time stays
  EXPECT_EQ(snap[2].queued_ns, t0.time_since_epoch().count());
  EXPECT_EQ(snap[3].state, TraceState::kStarted);
  EXPECT_EQ(snap[3].wait_peer, 2);
  EXPECT_EQ(snap[3].wait_done, 3u);
  EXPECT_EQ(snap[3].wait_total, 8u);
  EXPECT_EQ(rec.recorded(), 10u);
}

INSTANTIATE_TEST_SUITE_P(Transports, CommState, ::testing::Values(TransportKind::kInproc, TransportKind::kUcx),
                         [](const auto& info) { return std::string(transport_label(info.param)); });

}  // namespace
