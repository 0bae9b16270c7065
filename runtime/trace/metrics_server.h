// The HTTP endpoint of the metrics (GET /metrics), on cpp-httplib (Debian's libcpp-httplib-dev)
// when the build found it; otherwise start() says so and returns nullptr.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace weft {

class MetricsServer {
 public:
  // Serves body() at http://addr:port/metrics from a thread of its own; nullptr (logged) when the
  // port cannot be bound or the build has no HTTP library.
  static std::shared_ptr<MetricsServer> start(const std::string& addr, int port, std::function<std::string()> body);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

 private:
  MetricsServer() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
};

}  // namespace weft
