// Raw-socket tests against a live TcpStoreServer: authentication, malformed and oversized frames,
// clients vanishing mid-frame, bounded memory. The server must refuse or drop the offender, count
// it, and keep serving everyone else.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/store/store_protocol.h"
#include "runtime/store/tcp_store.h"

using namespace weft;
using namespace weft::store_proto;

namespace {

const std::string kSecret = "s3cret-for-the-store-test";

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ADD_FAILURE() << "connect failed";
  return fd;
}

void send_all(int fd, const Bytes& b) {
  size_t off = 0;
  while (off < b.size()) {
    ssize_t w = ::send(fd, b.data() + off, b.size() - off, MSG_NOSIGNAL);
    if (w <= 0) return;  // the server may have dropped us already
    off += static_cast<size_t>(w);
  }
}

// Reads until the server closes the connection (true) or timeout_ms passes (false).
bool closed_by_server(int fd, int timeout_ms = 3000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  uint8_t buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) {
      ssize_t r = ::recv(fd, buf, sizeof buf, 0);
      if (r <= 0) return true;
    }
  }
  return false;
}

// One request/response on an open connection; the reply's payload (nullopt if closed).
std::optional<Bytes> roundtrip(int fd, const Request& req) {
  send_all(fd, frame(encode_request(req)));
  FrameDecoder dec;
  uint8_t buf[4096];
  for (int i = 0; i < 100; ++i) {
    if (auto p = dec.next()) return p;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r <= 0) return std::nullopt;
    dec.feed(buf, static_cast<size_t>(r));
  }
  return std::nullopt;
}

int authed_client(int port) {
  int fd = connect_to(port);
  auto rep = roundtrip(fd, {Op::kAuth, kSecret, {}, 0});
  EXPECT_TRUE(rep.has_value());
  if (rep) {
    EXPECT_EQ(decode_response(Op::kAuth, rep->data(), rep->size()).status, Status::kOk);
  }
  return fd;
}

template <typename F>
bool eventually(F f, int ms = 3000) {
  for (int i = 0; i < ms / 10; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return f();
}

// The server still serves a well-behaved client.
void expect_serving(TcpStoreServer& server) {
  TcpStore good("127.0.0.1", server.port(), kSecret, std::chrono::milliseconds(5000));
  good.set("alive", {1, 2, 3});
  EXPECT_EQ(good.get("alive", std::chrono::milliseconds(1000)), (Bytes{1, 2, 3}));
}

TEST(StoreServer, WrongOrMissingSecretIsRefusedAndCounted) {
  TcpStoreServer server(kSecret, "127.0.0.1", 0);
  EXPECT_THROW(TcpStore("127.0.0.1", server.port(), "wrong", std::chrono::milliseconds(3000)), Error);
  EXPECT_THROW(TcpStore("127.0.0.1", server.port(), "", std::chrono::milliseconds(3000)), Error);
  EXPECT_THROW(TcpStore("127.0.0.1", server.port(), kSecret + "x", std::chrono::milliseconds(3000)), Error);
  EXPECT_TRUE(eventually([&] { return server.refused_connections() == 3; })) << server.refused_connections();
  // A first request that is not kAuth is refused too, and the reply says why.
  int fd = connect_to(server.port());
  auto rep = roundtrip(fd, {Op::kSet, "k", {1}, 0});
  ASSERT_TRUE(rep.has_value());
  Response r = decode_response(Op::kSet, rep->data(), rep->size());
  EXPECT_EQ(r.status, Status::kError);
  EXPECT_NE(r.error.find("secret"), std::string::npos) << r.error;
  EXPECT_TRUE(closed_by_server(fd));
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return server.refused_connections() == 4; }));
  expect_serving(server);
  EXPECT_EQ(server.stored_bytes(), std::string("alive").size() + 3) << "a refused client stored something";
}

TEST(StoreServer, MalformedFramesAreRejectedAndTheConnectionDropped) {
  TcpStoreServer server(kSecret, "127.0.0.1", 0);
  std::vector<Bytes> bad = {
      frame(Bytes{0}),                                    // opcode 0
      frame(Bytes{10, 0, 0, 0, 0}),                       // opcode 10
      frame(Bytes{0xff}),                                 // opcode 255, no fields
      frame(Bytes{2, 5, 0, 0, 0, 'a'}),                   // key truncated
      frame(Bytes{2, 1, 0, 0, 0, 'a', 3, 0}),             // value length truncated
      frame(Bytes{4, 1, 0, 0, 0, 'a', 1, 2, 3}),          // add: delta truncated
      frame(Bytes{3, 1, 0, 0, 0, 'a', 7}),                // get: one trailing byte
      frame(Bytes{5, 0xff, 0xff, 0xff, 0xff}),            // key length 4 GiB
      frame(Bytes{}),                                     // empty payload
      frame(Bytes{3, 0x01, 0x10, 0, 0}),                  // key of 4097 bytes declared (> limit)
  };
  uint64_t errors = 0;
  for (size_t i = 0; i < bad.size(); ++i) {
    int fd = authed_client(server.port());
    send_all(fd, bad[i]);
    EXPECT_TRUE(closed_by_server(fd)) << "frame " << i << " did not drop the connection";
    ::close(fd);
    ++errors;
    EXPECT_TRUE(eventually([&] { return server.protocol_errors() == errors; })) << "frame " << i;
  }
  // Before authentication a malformed frame is dropped as well.
  int fd = connect_to(server.port());
  send_all(fd, frame(Bytes{1, 9, 9}));
  EXPECT_TRUE(closed_by_server(fd));
  ::close(fd);
  expect_serving(server);
  EXPECT_TRUE(eventually([&] { return server.open_connections() == 0; }));
}

TEST(StoreServer, OversizedFrameIsRejectedWithoutAllocating) {
  TcpStoreServer server(kSecret, "127.0.0.1", 0);
  for (bool authed : {false, true}) {
    int fd = authed ? authed_client(server.port()) : connect_to(server.port());
    uint32_t n = kMaxFrameBytes + 1;
    Bytes hdr = {static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n >> 16),
                 static_cast<uint8_t>(n >> 24), 2};
    send_all(fd, hdr);
    EXPECT_TRUE(closed_by_server(fd)) << (authed ? "authenticated" : "unauthenticated");
    ::close(fd);
    // 0xffffffff too.
    fd = authed ? authed_client(server.port()) : connect_to(server.port());
    send_all(fd, Bytes{0xff, 0xff, 0xff, 0xff});
    EXPECT_TRUE(closed_by_server(fd));
    ::close(fd);
  }
  EXPECT_TRUE(eventually([&] { return server.protocol_errors() == 4; })) << server.protocol_errors();
  expect_serving(server);
}

TEST(StoreServer, UnauthenticatedClientCannotMakeTheServerBufferALargeFrame) {
  TcpStoreServer server(kSecret, "127.0.0.1", 0);
  int fd = connect_to(server.port());
  // A frame of 32 MiB declared (under the frame limit), before authenticating: an auth frame is
  // at most a few KiB, so the server must not buffer this.
  uint32_t n = 32u << 20;
  send_all(fd, Bytes{static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n >> 16),
                     static_cast<uint8_t>(n >> 24), 1});
  Bytes chunk(1 << 20, 'x');
  for (int i = 0; i < 8; ++i) send_all(fd, chunk);
  EXPECT_TRUE(closed_by_server(fd, 5000)) << "the server buffers megabytes for a client that has not authenticated";
  ::close(fd);
  expect_serving(server);
}

TEST(StoreServer, ClientsVanishingMidFrameDoNotTakeTheServerDown) {
  TcpStoreServer server(kSecret, "127.0.0.1", 0);
  for (int i = 0; i < 50; ++i) {
    int fd = i % 2 ? authed_client(server.port()) : connect_to(server.port());
    Bytes f = frame(encode_request({Op::kSet, "key" + std::to_string(i), Bytes(1000, 7), 0}));
    f.resize(static_cast<size_t>(i * 19) % f.size());  // cut anywhere, also inside the length
    send_all(fd, f);
    if (i % 3 == 0) {
      linger l{1, 0};  // reset instead of a clean close
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    ::close(fd);
  }
  EXPECT_TRUE(eventually([&] { return server.open_connections() == 0; })) << server.open_connections();
  expect_serving(server);
  EXPECT_EQ(server.stored_bytes(), std::string("alive").size() + 3) << "a partial frame was applied";
}

TEST(StoreServer, ManyClientsWithPartialFramesStayBounded) {
  TcpStoreServer server(kSecret, "127.0.0.1", 0);
  std::vector<int> fds;
  for (int i = 0; i < 200; ++i) {
    int fd = connect_to(server.port());
    send_all(fd, Bytes{0x00, 0x10, 0x00, 0x00, 1, 2, 3});  // 4 KiB declared, 3 bytes sent
    fds.push_back(fd);
  }
  EXPECT_TRUE(eventually([&] { return server.open_connections() == 200; })) << server.open_connections();
  expect_serving(server);  // the server keeps serving while 200 clients hang mid-frame
  for (int fd : fds) ::close(fd);
  EXPECT_TRUE(eventually([&] { return server.open_connections() == 0; }));
}

TEST(StoreServer, AddOverflowWrapsWithoutUndefinedBehaviour) {
  TcpStoreServer server(kSecret, "127.0.0.1", 0);
  TcpStore c("127.0.0.1", server.port(), kSecret, std::chrono::milliseconds(5000));
  EXPECT_EQ(c.add("n", INT64_MAX), INT64_MAX);
  int64_t v = c.add("n", 1);  // must not be signed overflow inside the server (UBSan checks)
  EXPECT_EQ(v, INT64_MIN);
  c.set("junk", {'x', 'y'});
  EXPECT_EQ(c.add("junk", 5), 5);
  c.set("big", Bytes(40, '9'));  // does not parse as an int64
  EXPECT_EQ(c.add("big", 1), 1);
}

TEST(StoreServer, StoredBytesAreAccountedAndErased) {
  TcpStoreServer server(kSecret, "127.0.0.1", 0);
  TcpStore c("127.0.0.1", server.port(), kSecret, std::chrono::milliseconds(5000));
  c.set("a", Bytes(1000, 1));
  c.set("a", Bytes(10, 1));
  EXPECT_EQ(server.stored_bytes(), 11u);
  c.erase("a");
  EXPECT_EQ(server.stored_bytes(), 0u);
  EXPECT_THROW(c.set(std::string(kMaxKeyBytes + 1, 'k'), {}), Error);
  // A disconnect notice is applied when its client vanishes.
  {
    TcpStore dying("127.0.0.1", server.port(), kSecret, std::chrono::milliseconds(5000));
    dying.set_on_disconnect("abort", {'x'});
  }
  EXPECT_TRUE(eventually([&] { return c.check("abort"); }));
  EXPECT_EQ(server.stored_bytes(), std::string("abort").size() + 1);
}

// set_if_absent: of clients racing for one key, exactly one value lands and every client is told
// that one (weftCommShrink's decision); it is accounted like a set.
TEST(StoreServer, SetIfAbsentLetsTheFirstWriterWin) {
  TcpStoreServer server(kSecret, "127.0.0.1", 0);
  constexpr int kClients = 8;
  std::vector<Bytes> seen(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      TcpStore c("127.0.0.1", server.port(), kSecret, std::chrono::milliseconds(5000));
      seen[i] = c.set_if_absent("decision", Bytes(3, static_cast<uint8_t>('a' + i)));
    });
  }
  for (auto& t : threads) t.join();
  TcpStore c("127.0.0.1", server.port(), kSecret, std::chrono::milliseconds(5000));
  const Bytes stored = c.get("decision", std::chrono::milliseconds(1000));
  for (const Bytes& s : seen) EXPECT_EQ(s, stored);
  EXPECT_EQ(server.stored_bytes(), std::string("decision").size() + 3);
  EXPECT_EQ(c.set_if_absent("decision", Bytes{'z'}), stored) << "an existing value must not be replaced";
  c.erase("decision");
  EXPECT_EQ(c.set_if_absent("decision", Bytes{'z'}), Bytes{'z'});
  EXPECT_EQ(server.stored_bytes(), std::string("decision").size() + 1);
}

}  // namespace
