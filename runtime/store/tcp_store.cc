#include "runtime/store/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/store/store_protocol.h"

namespace weft {

using namespace store_proto;
using Clock = std::chrono::steady_clock;

bool secrets_equal(const std::string& a, const std::string& b) {
  // Length is not secret; the contents are compared without an early exit.
  size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

namespace {

std::string peer_name(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
  }
  return fmt::format("{}:{}", host, port);
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

struct TcpStoreServer::Client {
  int fd = -1;
  std::string name;
  bool authed = false;
  Clock::time_point accepted;
  FrameDecoder decoder;
  Bytes out;  // pending output
  size_t out_pos = 0;
  std::map<std::string, Bytes> on_disconnect;  // set when this client vanishes
};

TcpStoreServer::TcpStoreServer(std::string secret, const std::string& host, int port) : secret_(std::move(secret)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) fail_errno("store server socket()");
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (host.empty() || host == "0.0.0.0") {
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    ::close(listen_fd_);
    fail(ErrorCode::kInvalidArgument, "store server: '{}' is not an IPv4 address to listen on", host);
  }
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    ::close(listen_fd_);
    fail(ErrorCode::kSystemError, "store server: cannot bind {}:{}: {}", host, port, std::strerror(e));
  }
  if (::listen(listen_fd_, 512) != 0) fail_errno("store server listen()");
  socklen_t len = sizeof addr;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  set_nonblocking(listen_fd_);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { run(); });
  WEFT_LOG_DEBUG("store server listening on port {}", port_);
}

TcpStoreServer::~TcpStoreServer() { stop(); }

void TcpStoreServer::set_notice_hook(NoticeHook hook) {
  std::lock_guard<std::mutex> lock(hook_mu_);
  hook_ = std::move(hook);
}

void TcpStoreServer::stop() {
  if (stopping_.exchange(true)) return;
  uint64_t one = 1;
  ssize_t rc = ::write(wake_fd_, &one, sizeof one);
  (void)rc;
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

bool TcpStoreServer::handle_payload(Client& c, const Bytes& payload) {
  Request req;
  try {
    req = decode_request(payload.data(), payload.size());
  } catch (const Error& e) {
    protocol_errors_++;
    WEFT_LOG_WARN("store server: dropping {}: {}", c.name, e.what());
    return false;
  }
  Response resp;
  if (!c.authed) {
    if (req.op != Op::kAuth || !secrets_equal(req.key, secret_)) {
      refused_++;
      WEFT_LOG_WARN("store server: refused connection from {}: {}", c.name,
                    req.op == Op::kAuth ? "wrong job secret" : "no job secret presented");
      resp.status = Status::kError;
      resp.error = "refused: wrong or missing job secret (WEFT_JOB_SECRET)";
      c.out = frame(encode_response(req.op, resp));
      ssize_t rc = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)rc;
      return false;
    }
    c.authed = true;
  } else {
    switch (req.op) {
      case Op::kAuth: break;
      case Op::kSet: {
        auto it = data_.find(req.key);
        size_t old = it == data_.end() ? 0 : it->second.size() + it->first.size();
        size_t now = stored_bytes_.load() - old + req.value.size() + req.key.size();
        if (now > kMaxStoredBytes) {
          resp.status = Status::kError;
          resp.error = "store full";
        } else {
          data_[req.key] = std::move(req.value);
          stored_bytes_ = now;
        }
        break;
      }
      case Op::kSetIfAbsent: {
        auto it = data_.find(req.key);
        if (it == data_.end()) {
          size_t now = stored_bytes_.load() + req.value.size() + req.key.size();
          if (now > kMaxStoredBytes) {
            resp.status = Status::kError;
            resp.error = "store full";
            break;
          }
          it = data_.emplace(req.key, std::move(req.value)).first;
          stored_bytes_ = now;
        }
        resp.value = it->second;
        break;
      }
      case Op::kGet: {
        auto it = data_.find(req.key);
        if (it == data_.end()) resp.status = Status::kMissing;
        else resp.value = it->second;
        break;
      }
      case Op::kAdd: {
        int64_t v = 0;
        auto it = data_.find(req.key);
        if (it != data_.end()) {
          try {
            v = std::stoll(std::string(it->second.begin(), it->second.end()));
          } catch (...) {
            v = 0;
          }
        }
        // Wraps like two's complement (a signed overflow would be undefined behaviour).
        v = static_cast<int64_t>(static_cast<uint64_t>(v) + static_cast<uint64_t>(req.delta));
        std::string s = std::to_string(v);
        size_t old = it == data_.end() ? 0 : it->second.size() + it->first.size();
        stored_bytes_ = stored_bytes_.load() - old + s.size() + req.key.size();
        data_[req.key] = Bytes(s.begin(), s.end());
        resp.number = v;
        break;
      }
      case Op::kCheck: resp.status = data_.count(req.key) ? Status::kOk : Status::kMissing; break;
      case Op::kOnDisconnect:
        if (c.on_disconnect.size() >= kMaxNoticesPerClient && !c.on_disconnect.count(req.key)) {
          resp.status = Status::kError;
          resp.error = "too many disconnect notices";
        } else {
          c.on_disconnect[req.key] = std::move(req.value);
        }
        break;
      case Op::kCancelOnDisconnect: c.on_disconnect.erase(req.key); break;
      case Op::kErase: {
        auto it = data_.find(req.key);
        if (it != data_.end()) {
          stored_bytes_ -= it->second.size() + it->first.size();
          data_.erase(it);
        }
        break;
      }
    }
  }
  Bytes f = frame(encode_response(req.op, resp));
  c.out.insert(c.out.end(), f.begin(), f.end());
  return true;
}

void TcpStoreServer::run() {
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<pollfd> fds;
  std::vector<uint8_t> buf(64 * 1024);
  while (!stopping_.load()) {
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& c : clients) {
      short ev = POLLIN;
      if (c->out_pos < c->out.size()) ev |= POLLOUT;
      fds.push_back({c->fd, ev, 0});
    }
    int n = ::poll(fds.data(), fds.size(), 1000);
    if (n < 0 && errno != EINTR) break;
    if (fds[0].revents) break;
    if (fds[1].revents & POLLIN) {
      for (;;) {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;
        if (clients.size() >= static_cast<size_t>(kMaxConnections)) {
          ::close(fd);
          refused_++;
          continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        auto c = std::make_unique<Client>();
        c->fd = fd;
        c->name = peer_name(ss);
        c->accepted = Clock::now();
        clients.push_back(std::move(c));
      }
    }
    auto now = Clock::now();
    for (size_t i = 0; i < clients.size(); ++i) {
      Client& c = *clients[i];
      bool drop = false;
      short rev = i + 2 < fds.size() && fds[i + 2].fd == c.fd ? fds[i + 2].revents : 0;
      if (rev & POLLIN) {
        ssize_t r = ::recv(c.fd, buf.data(), buf.size(), 0);
        if (r <= 0) {
          drop = r == 0 || (errno != EAGAIN && errno != EINTR);
        } else {
          try {
            c.decoder.feed(buf.data(), static_cast<size_t>(r));
            while (auto p = c.decoder.next()) {
              if (!handle_payload(c, *p)) {
                drop = true;
                break;
              }
            }
            // Until it has authenticated, a client gets no more buffer than the largest auth frame.
            if (!drop && !c.authed && c.decoder.buffered() > 4 + 1 + 4 + kMaxKeyBytes) {
              fail(ErrorCode::kInvalidArgument, "store protocol: {} bytes buffered before authentication",
                   c.decoder.buffered());
            }
          } catch (const Error& e) {
            protocol_errors_++;
            WEFT_LOG_WARN("store server: dropping {}: {}", c.name, e.what());
            drop = true;
          }
        }
      } else if (rev & (POLLERR | POLLHUP)) {
        drop = true;
      }
      if (!drop && c.out_pos < c.out.size()) {
        ssize_t w = ::send(c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) c.out_pos += static_cast<size_t>(w);
        else if (w < 0 && errno != EAGAIN && errno != EINTR) drop = true;
        if (c.out_pos == c.out.size()) {
          c.out.clear();
          c.out_pos = 0;
        }
      }
      if (!drop && !c.authed && now - c.accepted > std::chrono::seconds(10)) {
        refused_++;
        WEFT_LOG_WARN("store server: refused connection from {}: no job secret within 10 s", c.name);
        drop = true;
      }
      if (drop) {
        for (auto& [key, value] : c.on_disconnect) {
          // The first word wins: a notice never overwrites a key already set (a rank that
          // exits after reporting or receiving an error must not hide the real cause).
          if (data_.count(key)) continue;
          WEFT_LOG_DEBUG("store server: {} vanished; setting {}", c.name, key);
          stored_bytes_ += key.size() + value.size();
          {
            std::lock_guard<std::mutex> lock(hook_mu_);
            if (hook_) hook_(key, value);
          }
          data_[key] = std::move(value);
        }
        ::close(c.fd);
        clients[i].reset();
      }
    }
    std::erase_if(clients, [](const std::unique_ptr<Client>& c) { return !c; });
    open_connections_ = clients.size();
  }
  for (auto& c : clients) ::close(c->fd);
}

// ---- client ----------------------------------------------------------------------------------

TcpStore::TcpStore(const std::string& host, int port, const std::string& secret, Millis connect_timeout) {
  where_ = fmt::format("{}:{}", host, port);
  auto deadline = Clock::now() + connect_timeout;
  std::string last_error = "no attempt";
  auto backoff = std::chrono::milliseconds(10);
  for (;;) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (gai != 0) {
      last_error = gai_strerror(gai);
    } else {
      for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
          fd_ = fd;
          break;
        }
        last_error = std::strerror(errno);
        ::close(fd);
      }
      freeaddrinfo(res);
    }
    if (fd_ >= 0) break;
    if (Clock::now() + backoff > deadline) {
      fail(ErrorCode::kTimeout, "store: could not connect to {} within {} ms ({}); is rank 0 running and "
           "WEFT_MASTER_ADDR/WEFT_MASTER_PORT right?", where_, connect_timeout.count(), last_error);
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  Request auth{Op::kAuth, secret, {}, 0};
  Bytes reply = request(encode_request(auth), connect_timeout);
  Response r = decode_response(Op::kAuth, reply.data(), reply.size());
  if (r.status != Status::kOk) {
    ::close(fd_);
    fd_ = -1;
    fail(ErrorCode::kInvalidUsage, "store at {} refused this process: {}", where_, r.error);
  }
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

Bytes TcpStore::request(const Bytes& payload, Millis timeout) {
  if (fd_ < 0) fail(ErrorCode::kRemoteError, "store at {}: connection lost", where_);
  auto deadline = Clock::now() + timeout;
  auto remaining_ms = [&] {
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
    return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left, 1 << 30)));
  };
  auto lost = [&](const char* why) {
    ::close(fd_);
    fd_ = -1;
    fail(ErrorCode::kRemoteError, "store at {}: {} (the serving rank may have exited)", where_, why);
  };
  Bytes f = frame(payload);
  size_t off = 0;
  while (off < f.size()) {
    ssize_t w = ::send(fd_, f.data() + off, f.size() - off, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      lost(std::strerror(errno));
    }
    off += static_cast<size_t>(w);
  }
  FrameDecoder dec;
  uint8_t buf[4096];
  for (;;) {
    if (auto p = dec.next()) return *p;
    pollfd pfd{fd_, POLLIN, 0};
    int n = ::poll(&pfd, 1, remaining_ms());
    if (n == 0) {
      ::close(fd_);
      fd_ = -1;
      fail(ErrorCode::kTimeout, "store at {}: no reply within {} ms", where_, timeout.count());
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      lost(std::strerror(errno));
    }
    ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
    if (r == 0) lost("connection closed");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      lost(std::strerror(errno));
    }
    dec.feed(buf, static_cast<size_t>(r));
  }
}

namespace {
constexpr Millis kRequestTimeout{60000};
void check_key(const std::string& key) {
  if (key.size() > kMaxKeyBytes) fail(ErrorCode::kInvalidArgument, "store: key of {} bytes is too long", key.size());
}
Response reply_of(Op op, const Bytes& b, const std::string& where) {
  Response r = decode_response(op, b.data(), b.size());
  if (r.status == Status::kError) fail(ErrorCode::kRemoteError, "store at {}: {}", where, r.error);
  return r;
}
}  // namespace

void TcpStore::set(const std::string& key, const Bytes& value) {
  check_key(key);
  std::lock_guard<std::mutex> lock(mu_);
  reply_of(Op::kSet, request(encode_request({Op::kSet, key, value, 0}), kRequestTimeout), where_);
}

Bytes TcpStore::get(const std::string& key, Millis timeout) {
  check_key(key);
  auto deadline = Clock::now() + timeout;
  auto backoff = std::chrono::microseconds(100);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Response r = reply_of(Op::kGet, request(encode_request({Op::kGet, key, {}, 0}), kRequestTimeout), where_);
      if (r.status == Status::kOk) return r.value;
    }
    if (Clock::now() + backoff > deadline) {
      fail(ErrorCode::kTimeout, "store: timed out after {} ms waiting for key '{}'", timeout.count(), key);
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::microseconds(20000));
  }
}

void TcpStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  auto deadline = Clock::now() + timeout;
  for (auto& k : keys) {
    get(k, std::max(Millis(0), std::chrono::duration_cast<Millis>(deadline - Clock::now())));
  }
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  check_key(key);
  std::lock_guard<std::mutex> lock(mu_);
  return reply_of(Op::kAdd, request(encode_request({Op::kAdd, key, {}, delta}), kRequestTimeout), where_).number;
}

bool TcpStore::check(const std::string& key) {
  check_key(key);
  std::lock_guard<std::mutex> lock(mu_);
  return reply_of(Op::kCheck, request(encode_request({Op::kCheck, key, {}, 0}), kRequestTimeout), where_).status ==
         Status::kOk;
}

Bytes TcpStore::set_if_absent(const std::string& key, const Bytes& value) {
  check_key(key);
  std::lock_guard<std::mutex> lock(mu_);
  return reply_of(Op::kSetIfAbsent, request(encode_request({Op::kSetIfAbsent, key, value, 0}), kRequestTimeout), where_).value;
}

void TcpStore::set_on_disconnect(const std::string& key, const Bytes& value) {
  check_key(key);
  std::lock_guard<std::mutex> lock(mu_);
  reply_of(Op::kOnDisconnect, request(encode_request({Op::kOnDisconnect, key, value, 0}), kRequestTimeout), where_);
}

void TcpStore::cancel_on_disconnect(const std::string& key) {
  check_key(key);
  std::lock_guard<std::mutex> lock(mu_);
  reply_of(Op::kCancelOnDisconnect, request(encode_request({Op::kCancelOnDisconnect, key, {}, 0}), kRequestTimeout), where_);
}

void TcpStore::erase(const std::string& key) {
  check_key(key);
  std::lock_guard<std::mutex> lock(mu_);
  reply_of(Op::kErase, request(encode_request({Op::kErase, key, {}, 0}), kRequestTimeout), where_);
}

}  // namespace weft
