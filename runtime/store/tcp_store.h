// The TCP store: rank 0 (or weftrun) serves it; every rank connects as a client. A connection
// must first prove the job secret (compared in constant time) or it is refused and logged.
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/store/store.h"

namespace weft {

class TcpStoreServer {
 public:
  // Listens on host:port (port 0 = ephemeral; host "" or "0.0.0.0" = all interfaces).
  TcpStoreServer(std::string secret, const std::string& host = "0.0.0.0", int port = 0);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const { return port_; }
  void stop();
  // Called on the server's thread with each disconnect notice it applies (a client vanished
  // without cancelling it): weftrun reports the ranks whose notices say they died.
  using NoticeHook = std::function<void(const std::string& key, const Bytes& value)>;
  void set_notice_hook(NoticeHook hook);
  // Figures for tests: refused connections, protocol errors, bytes held.
  uint64_t refused_connections() const { return refused_.load(); }
  uint64_t protocol_errors() const { return protocol_errors_.load(); }
  size_t stored_bytes() const { return stored_bytes_.load(); }
  size_t open_connections() const { return open_connections_.load(); }

  static constexpr size_t kMaxStoredBytes = size_t{1} << 30;
  static constexpr int kMaxConnections = 4096;
  static constexpr size_t kMaxNoticesPerClient = 1024;

 private:
  struct Client;
  void run();
  bool handle_payload(Client& c, const Bytes& payload);  // false: drop the connection

  std::string secret_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::map<std::string, Bytes> data_;
  std::mutex hook_mu_;
  NoticeHook hook_;
  std::atomic<uint64_t> refused_{0}, protocol_errors_{0};
  std::atomic<size_t> stored_bytes_{0}, open_connections_{0};
};

class TcpStore : public Store {
 public:
  // Connects (retrying until connect_timeout) and authenticates with secret.
  TcpStore(const std::string& host, int port, const std::string& secret, Millis connect_timeout);
  ~TcpStore() override;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::string& key) override;
  void erase(const std::string& key) override;
  Bytes set_if_absent(const std::string& key, const Bytes& value) override;
  void set_on_disconnect(const std::string& key, const Bytes& value) override;
  void cancel_on_disconnect(const std::string& key) override;
  // Keeps a server alive as long as this client (rank 0 serves the store it uses).
  void own_server(std::shared_ptr<TcpStoreServer> server) { server_ = std::move(server); }
  const std::shared_ptr<TcpStoreServer>& server() const { return server_; }

 private:
  Bytes request(const Bytes& payload, Millis timeout);
  std::mutex mu_;
  int fd_ = -1;
  std::string where_;
  std::shared_ptr<TcpStoreServer> server_;
};

// Constant-time equality for secrets.
bool secrets_equal(const std::string& a, const std::string& b);

}  // namespace weft
