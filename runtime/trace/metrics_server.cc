#include "runtime/trace/metrics_server.h"

#include "runtime/base/log.h"
#include "weft/config.h"
#if WEFT_HAVE_HTTPLIB
#include <httplib.h>
#endif

namespace weft {

#if WEFT_HAVE_HTTPLIB
struct MetricsServer::Impl {
  httplib::Server server;
};

std::shared_ptr<MetricsServer> MetricsServer::start(const std::string& addr, int port, std::function<std::string()> body) {
  std::shared_ptr<MetricsServer> s(new MetricsServer());
  s->impl_ = std::make_unique<Impl>();
  auto& srv = s->impl_->server;
  srv.new_task_queue = [] { return new httplib::ThreadPool(1); };  // a scrape at a time is plenty
  srv.Get("/metrics", [body = std::move(body)](const httplib::Request&, httplib::Response& res) {
    res.set_content(body(), "text/plain; version=0.0.4; charset=utf-8");
  });
  if (!srv.bind_to_port(addr.c_str(), port)) {
    WEFT_LOG_WARN("metrics: cannot listen on {}:{} (WEFT_METRICS_PORT + local rank); no HTTP endpoint", addr, port);
    return nullptr;
  }
  s->thread_ = std::thread([&srv] { srv.listen_after_bind(); });
  WEFT_LOG_INFO("metrics served at http://{}:{}/metrics", addr, port);
  return s;
}

MetricsServer::~MetricsServer() {
  if (impl_) impl_->server.stop();
  if (thread_.joinable()) thread_.join();
}
#else
struct MetricsServer::Impl {};

std::shared_ptr<MetricsServer> MetricsServer::start(const std::string& addr, int port, std::function<std::string()>) {
  WEFT_LOG_WARN("metrics: Weft was built without cpp-httplib (libcpp-httplib-dev): no endpoint at {}:{}; WEFT_METRICS_FILE works", addr, port);
  return nullptr;
}

MetricsServer::~MetricsServer() = default;
#endif

}  // namespace weft
