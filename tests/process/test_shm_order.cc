// The shared-memory transport when a sender posts its sends in another order than the receiver
// posts the matching receives (issue 44): every send must complete and every receive get its
// bytes, whatever the order, at each of the transport's three sizes (inline in the descriptor,
// staged in one of the pair's 4 chunks, read from the sender's memory), with more messages
// ahead of the first one received than the pair has chunks (4) or descriptors (32).
//
// The sender posts messages n-1, ..., 0 at once; the receiver posts the receive of message k only
// once message k-1 has arrived. Before the fix the ring's descriptors or chunks held the last
// messages, the first ones waited in the sender's backlog behind them, and both ranks waited
// forever: the tree all-reduce hit this in about one run in four when its executor posted a
// leaf's up-slices 12-15 before 8-11 and the parent had slots for 8-11 only.
//
// The two ranks are threads of this process, each with its own transport over one segment.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "runtime/store/memory_store.h"
#include "runtime/transport/shm/shm_transport.h"

namespace {

using Clock = std::chrono::steady_clock;

uint8_t byte_of(int msg, size_t i) { return static_cast<uint8_t>(msg * 131 + i * 7 + (i >> 9)); }

// Runs one exchange of n messages of len bytes; `reduce`: odd messages are received as
// receive-reduce (float32 sum with a buffer of ones). Returns "" or what went wrong.
std::string exchange(int n, size_t len, bool reduce) {
  auto store = std::make_shared<weft::MemoryStore>();
  const std::vector<int> nodes{0, 0};
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  std::string errors[2];
  // Each rank leaves its transport (and its buffers, which the other may still be reading) only
  // once both are done.
  auto leave = [&](int me) {
    store->set("done" + std::to_string(me), {});
    store->wait({"done" + std::to_string(1 - me)}, std::chrono::milliseconds(30000));
  };
  auto rank0 = [&] {
    weft::ShmTransport t(store, 0, 2, nodes, nullptr, std::chrono::milliseconds(10000));
    std::vector<std::vector<uint8_t>> bufs(n);
    std::vector<weft::TransportOp> ops(n);
    for (int m = n - 1; m >= 0; --m) {
      bufs[m].resize(len);
      for (size_t i = 0; i < len; ++i) bufs[m][i] = byte_of(m, i);
      if (reduce && m % 2) {
        for (size_t i = 0; i + 4 <= len; i += 4) {
          const float v = static_cast<float>(m * 1000 + (i / 4) % 997);
          std::memcpy(&bufs[m][i], &v, 4);
        }
      }
      t.post_send(1, static_cast<uint64_t>(m), bufs[m].data(), len, &ops[m]);
    }
    for (;;) {
      int done = 0;
      for (auto& op : ops) done += !op.pending();
      if (done == n) break;
      if (Clock::now() > deadline) {
        errors[0] = "rank 0: " + std::to_string(n - done) + " of " + std::to_string(n) + " sends still pending after 10 s; ";
        t.shutdown("test over");
        break;
      }
      if (!t.progress()) t.wait_for_event(std::min(deadline, Clock::now() + std::chrono::milliseconds(5)));
    }
    for (int m = 0; m < n && errors[0].empty(); ++m)
      if (ops[m].state.load() != weft::TransportOp::kDone) errors[0] = "rank 0: send " + std::to_string(m) + " failed";
    leave(0);
  };
  auto rank1 = [&] {
    weft::ShmTransport t(store, 1, 2, nodes, nullptr, std::chrono::milliseconds(10000));
    std::vector<uint8_t> got(len);
    std::vector<float> ones(len / 4, 1.0f);
    std::vector<weft::TransportOp> ops(n);  // outlive the loop: a timed-out receive stays posted
    for (int m = 0; m < n && errors[1].empty(); ++m) {
      weft::TransportOp& op = ops[m];
      std::fill(got.begin(), got.end(), 0);
      const bool as_reduce = reduce && m % 2;
      if (as_reduce)
        t.post_recv_reduce(0, static_cast<uint64_t>(m), ~uint64_t{0}, got.data(), ones.data(), len, weft::DataType::kFloat32,
                           weft::RedOp::kSum, &op);
      else
        t.post_recv(0, static_cast<uint64_t>(m), ~uint64_t{0}, got.data(), len, &op);
      while (op.pending()) {
        if (Clock::now() > deadline) {
          errors[1] = "rank 1: message " + std::to_string(m) + " of " + std::to_string(n) + " never arrived (10 s)";
          break;
        }
        if (!t.progress()) t.wait_for_event(std::min(deadline, Clock::now() + std::chrono::milliseconds(5)));
      }
      if (!errors[1].empty()) break;
      if (op.state.load() != weft::TransportOp::kDone) {
        errors[1] = "rank 1: message " + std::to_string(m) + " failed: " + op.error_message;
        break;
      }
      if (op.bytes != len || (op.sender_tag & 0xffff) != static_cast<uint64_t>(m)) {
        errors[1] = "rank 1: message " + std::to_string(m) + ": " + std::to_string(op.bytes) + " bytes, tag " +
                    std::to_string(op.sender_tag);
        break;
      }
      for (size_t i = 0; i < len; ++i) {
        uint8_t want = byte_of(m, i);
        if (as_reduce) {
          if (i % 4 || i + 4 > len) continue;
          float v, w = static_cast<float>(m * 1000 + (i / 4) % 997) + 1.0f;
          std::memcpy(&v, &got[i], 4);
          if (v != w) {
            errors[1] = "rank 1: message " + std::to_string(m) + " element " + std::to_string(i / 4) + " is " +
                        std::to_string(v) + ", expected " + std::to_string(w);
            break;
          }
          continue;
        }
        if (got[i] != want) {
          errors[1] = "rank 1: message " + std::to_string(m) + " byte " + std::to_string(i) + " is wrong";
          break;
        }
      }
    }
    if (!errors[1].empty()) t.shutdown("test over");
    leave(1);
  };
  std::thread a(rank0), b(rank1);
  a.join();
  b.join();
  return errors[0] + errors[1];
}

class ShmOrder : public ::testing::TestWithParam<std::tuple<const char*, int, size_t>> {};

TEST_P(ShmOrder, SendsPostedInReverseOfTheReceives) {
  if (!weft::ShmTransport::usable()) GTEST_SKIP() << "cross-memory attach is refused here (kernel.yama.ptrace_scope)";
  const auto [what, n, len] = GetParam();
  EXPECT_EQ(exchange(n, len, false), "") << what;
  EXPECT_EQ(exchange(n, len, true), "") << what << " (odd messages received as receive-reduce)";
}
// 40 > 32 descriptors; 12 > 4 staging chunks (128 KiB: a tree slice at the default slice size);
// 36 > 32 descriptors of messages read from the sender's memory (past the 1 MiB chunk).
INSTANTIATE_TEST_SUITE_P(Sizes, ShmOrder,
                         ::testing::Values(std::make_tuple("inline", 40, size_t{1000}),
                                           std::make_tuple("staged", 12, size_t{128} << 10),
                                           std::make_tuple("rendezvous", 36, (size_t{1} << 20) + 4096)),
                         [](const auto& info) { return std::string(std::get<0>(info.param)); });

}  // namespace
