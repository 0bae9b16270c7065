#include "runtime/trace/telemetry.h"

#include <unistd.h>

#include <ctime>
#include <utility>

#include "runtime/base/log.h"
#include "runtime/store/store.h"
#include "runtime/trace/trace_registry.h"

namespace weft {

namespace {
// A job id that the world's rank 0 makes and the others read: the default dump folder's name.
std::string agree_job_id(Store& store, int rank, std::chrono::milliseconds timeout) {
  if (rank == 0) {
    char when[32] = {};
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    std::strftime(when, sizeof when, "%Y%m%d-%H%M%S", &tm);
    const std::string id = fmt::format("{}-{}", when, getpid());
    store.set("trace/job", to_bytes(id));
    return id;
  }
  return to_string(store.get("trace/job", timeout));
}
}  // namespace

Telemetry::Telemetry(TelemetryInit init) {
  if (MetricsRegistry::enabled()) {
    auto& metrics = MetricsRegistry::instance();
    if (init.world) metrics.start(init.rank, init.local_rank);
    metrics_ = std::make_unique<CommMetrics>(init.rank, init.size);
    metrics_handle_ = metrics.attach(init.name, init.rank, metrics_.get());
  }
  if (init.trace_buffer == 0) return;
  recorder_ = std::make_unique<FlightRecorder>(init.trace_buffer);
  auto& registry = TraceRegistry::instance();
  if (init.world && init.store) registry.set_world(agree_job_id(*init.store, init.rank, init.timeout), init.rank);
  TraceSource src;
  src.name = init.name;
  src.rank = init.rank;
  src.size = init.size;
  src.recorder = recorder_.get();
  src.broken = std::move(init.broken);
  src.last_error = std::move(init.last_error);
  if (init.store && init.size > 1) {
    std::shared_ptr<Store> store = init.store;
    src.remote_failure = [store] {
      return store->check("abort") ? to_string(store->get("abort", std::chrono::milliseconds(1000))) : std::string();
    };
  }
  handle_ = registry.attach(std::move(src));
}

Telemetry::~Telemetry() { detach(); }

void Telemetry::detach() {
  if (const uint64_t h = std::exchange(handle_, 0)) TraceRegistry::instance().detach(h);
  if (const uint64_t h = std::exchange(metrics_handle_, 0)) MetricsRegistry::instance().detach(h);
}

std::string Telemetry::on_failure(const std::string& why) {
  if (!recorder_ || failure_dumped_.exchange(true)) return "";
  return dump(why);
}

Telemetry::AlgorithmClass& Telemetry::algorithm_class(CollectiveKind kind, uint64_t bytes) {
  const int width = bytes ? 64 - __builtin_clzll(bytes) : 0;
  return classes_[static_cast<size_t>(kind) * 65 + static_cast<size_t>(width)];
}

std::string Telemetry::dump(const std::string& reason) {
  if (!recorder_) return "";
  return TraceRegistry::instance().dump(reason);
}

}  // namespace weft
