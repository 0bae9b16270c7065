#include "runtime/trace/metrics.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "runtime/trace/metrics_server.h"

namespace weft {

namespace {

struct Family {
  const char* name;
  const char* type;
  const char* help;
};
// The order of CommMetrics::expose's families, then the steps'.
constexpr Family kFamilies[] = {
    {"weft_collective_calls_total", "counter", "Collective calls finished, per communicator, collective and algorithm."},
    {"weft_collective_bytes_total", "counter", "Bytes of the collective calls finished (nccl-tests' size: the call's data)."},
    {"weft_collective_latency_seconds", "histogram", "Time of a collective call, from its start to its end."},
    {"weft_collective_busbw_bytes", "gauge", "Bus bandwidth of the last call, in bytes per second (nccl-tests' busbw)."},
    {"weft_collective_errors_total", "counter", "Collective calls that failed (not counting bad arguments)."},
    {"weft_steps_total", "counter", "Training steps finished, per source (the overlap reducer, the PyTorch backend)."},
    {"weft_step_seconds_total", "counter", "Time of the training steps finished."},
    {"weft_step_exposed_sync_seconds_total", "counter", "Time the steps waited for gradient synchronisation that the backward did not hide."},
    {"weft_step_last_seconds", "gauge", "Time of the last step."},
    {"weft_step_last_exposed_sync_seconds", "gauge", "Exposed synchronisation time of the last step."},
    {"weft_step_sync_share", "gauge", "The last step's exposed synchronisation time over its step time: the share of the step that communication costs."},
};
constexpr size_t kCommFamilies = 5;

std::string num(double v) { return fmt::format("{}", v); }

std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// "weft.prom" -> "weft.3.prom"; "%r" or "{rank}" replaced by the rank.
std::string for_rank(std::string path, int rank) {
  const std::string r = std::to_string(rank < 0 ? 0 : rank);
  for (const char* token : {"%r", "{rank}"})
    if (auto p = path.find(token); p != std::string::npos) return path.replace(p, std::strlen(token), r);
  const auto slash = path.rfind('/');
  const auto dot = path.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) return path.insert(dot, "." + r);
  return path + "." + r;
}

}  // namespace

double CommMetrics::bus_factor(CollectiveKind kind) const {
  const double n = size_;
  switch (kind) {
    case CollectiveKind::kAllReduce: return n > 1 ? 2 * (n - 1) / n : 0;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kAllToAllv: return n > 1 ? (n - 1) / n : 0;
    case CollectiveKind::kBarrier: return 0;
    default: return 1;
  }
}

void CommMetrics::observe(CollectiveKind kind, const char* algorithm, uint64_t bytes, int64_t ns) {
  auto& row = cells_[static_cast<size_t>(kind)];
  Cell* cell = nullptr;
  for (Cell& c : row) {
    const char* a = c.algorithm.load(std::memory_order_relaxed);
    if (a == algorithm || (a && algorithm && std::strcmp(a, algorithm) == 0)) {
      cell = &c;
      break;
    }
    if (!a) {
      c.algorithm.store(algorithm ? algorithm : "?", std::memory_order_release);
      cell = &c;
      break;
    }
  }
  if (!cell) cell = &row[kAlgorithms - 1];  // more algorithms than cells: the last one takes the rest
  bump(cell->calls, 1);
  bump(cell->bytes, bytes);
  bump(cell->sum_ns, static_cast<uint64_t>(ns > 0 ? ns : 0));
  const double s = static_cast<double>(ns) * 1e-9;
  size_t b = 0;
  while (b < kLatencyBuckets.size() && s > kLatencyBuckets[b]) ++b;
  if (b < kLatencyBuckets.size()) bump(cell->buckets[b], 1);
  if (ns > 0) cell->busbw.store(static_cast<double>(bytes) / s * bus_factor(kind), std::memory_order_relaxed);
}

void CommMetrics::expose(std::vector<std::string>& f, const std::string& labels) const {
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    const auto kind = static_cast<CollectiveKind>(k);
    const std::string coll = fmt::format("{},collective=\"{}\"", labels, collective_name(kind));
    for (const Cell& c : cells_[k]) {
      const char* a = c.algorithm.load(std::memory_order_acquire);
      if (!a) break;
      const std::string l = fmt::format("{},algorithm=\"{}\"", coll, escape(a));
      const uint64_t calls = c.calls.load(std::memory_order_relaxed);
      f[0] += fmt::format("weft_collective_calls_total{{{}}} {}\n", l, calls);
      f[1] += fmt::format("weft_collective_bytes_total{{{}}} {}\n", l, c.bytes.load(std::memory_order_relaxed));
      uint64_t cumulative = 0;
      for (size_t b = 0; b < kLatencyBuckets.size(); ++b) {
        cumulative += c.buckets[b].load(std::memory_order_relaxed);
        f[2] += fmt::format("weft_collective_latency_seconds_bucket{{{},le=\"{}\"}} {}\n", l, num(kLatencyBuckets[b]), cumulative);
      }
      // +Inf counts every call (the calls beyond the last bucket are the difference).
      f[2] += fmt::format("weft_collective_latency_seconds_bucket{{{},le=\"+Inf\"}} {}\n", l, std::max(calls, cumulative));
      f[2] += fmt::format("weft_collective_latency_seconds_sum{{{}}} {}\n", l,
                          num(static_cast<double>(c.sum_ns.load(std::memory_order_relaxed)) * 1e-9));
      f[2] += fmt::format("weft_collective_latency_seconds_count{{{}}} {}\n", l, std::max(calls, cumulative));
      f[3] += fmt::format("weft_collective_busbw_bytes{{{}}} {}\n", l, num(c.busbw.load(std::memory_order_relaxed)));
    }
    const uint64_t errors = errors_[k].load(std::memory_order_relaxed);
    if (errors) f[4] += fmt::format("weft_collective_errors_total{{{}}} {}\n", coll, errors);
  }
}

MetricsRegistry& MetricsRegistry::instance() {
  static MetricsRegistry* r = new MetricsRegistry();  // never destroyed: threads and atexit may use it late
  return *r;
}

bool MetricsRegistry::enabled() {
  static const bool on = [] {
    const char* port = std::getenv("WEFT_METRICS_PORT");
    const char* file = std::getenv("WEFT_METRICS_FILE");
    return (port && *port) || (file && *file);
  }();
  return on;
}

uint64_t MetricsRegistry::attach(const std::string& comm, int rank, const CommMetrics* metrics) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.push_back({next_handle_, comm, rank, metrics});
  return next_handle_++;
}

void MetricsRegistry::detach(uint64_t handle) {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = entries_.size() == 1 && entries_.front().handle == handle;
  }
  // The last communicator's final figures stay in the file.
  if (last) write_file();
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(entries_, [&](const Entry& e) { return e.handle == handle; });
}

void MetricsRegistry::record_step(const std::string& source, double step_seconds, double exposed_sync_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  Steps* s = nullptr;
  for (auto& x : steps_)
    if (x.source == source) s = &x;
  if (!s) {
    steps_.push_back({source});
    s = &steps_.back();
  }
  ++s->steps;
  s->step_s += step_seconds;
  s->exposed_s += exposed_sync_seconds;
  s->last_step_s = step_seconds;
  s->last_exposed_s = exposed_sync_seconds;
}

std::string MetricsRegistry::text() {
  std::vector<std::string> f(std::size(kFamilies));
  std::lock_guard<std::mutex> lock(mu_);
  const std::string rank = std::to_string(world_rank_);
  for (const Entry& e : entries_) {
    const std::string labels = fmt::format("rank=\"{}\",comm=\"{}\",comm_rank=\"{}\"", world_rank_ >= 0 ? rank : std::to_string(e.rank),
                                           escape(e.comm), e.rank);
    e.metrics->expose(f, labels);
  }
  for (const Steps& s : steps_) {
    const std::string l = fmt::format("rank=\"{}\",source=\"{}\"", world_rank_, escape(s.source));
    f[kCommFamilies + 0] += fmt::format("weft_steps_total{{{}}} {}\n", l, s.steps);
    f[kCommFamilies + 1] += fmt::format("weft_step_seconds_total{{{}}} {}\n", l, num(s.step_s));
    f[kCommFamilies + 2] += fmt::format("weft_step_exposed_sync_seconds_total{{{}}} {}\n", l, num(s.exposed_s));
    f[kCommFamilies + 3] += fmt::format("weft_step_last_seconds{{{}}} {}\n", l, num(s.last_step_s));
    f[kCommFamilies + 4] += fmt::format("weft_step_last_exposed_sync_seconds{{{}}} {}\n", l, num(s.last_exposed_s));
    f[kCommFamilies + 5] += fmt::format("weft_step_sync_share{{{}}} {}\n", l,
                                        num(s.last_step_s > 0 ? s.last_exposed_s / s.last_step_s : 0.0));
  }
  std::string out;
  for (size_t i = 0; i < f.size(); ++i)
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}", kFamilies[i].name, kFamilies[i].help, kFamilies[i].name,
                       kFamilies[i].type, f[i]);
  return out;
}

std::string MetricsRegistry::file_path() {
  const char* file = std::getenv("WEFT_METRICS_FILE");
  if (!file || !*file) return "";
  std::lock_guard<std::mutex> lock(mu_);
  return for_rank(file, world_rank_);
}

bool MetricsRegistry::write_file() {
  const std::string path = file_path();
  if (path.empty()) return false;
  {
    // Once the last communicator is gone its final figures stay (written by detach()).
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.empty()) return false;
  }
  const std::string body = text();
  const std::string tmp = fmt::format("{}.tmp{}", path, getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) {
    WEFT_LOG_WARN("metrics: cannot write {}: {}", tmp, std::strerror(errno));
    return false;
  }
  const bool ok = std::fwrite(body.data(), 1, body.size(), f) == body.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    WEFT_LOG_WARN("metrics: cannot write {}: {}", path, std::strerror(errno));
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

void MetricsRegistry::start(int world_rank, int local_rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  world_rank_ = world_rank;
  const EnvLookup env = process_env();
  if (const char* port = std::getenv("WEFT_METRICS_PORT"); port && *port) {
    const int64_t base = env_int(env, "WEFT_METRICS_PORT", 0, 1, 65535);
    const int p = static_cast<int>(base) + local_rank;
    const char* addr = std::getenv("WEFT_METRICS_ADDR");
    server_ = MetricsServer::start(addr && *addr ? addr : "0.0.0.0", p, [this] { return text(); });
    if (server_) bound_port_ = p;
  }
  if (const char* file = std::getenv("WEFT_METRICS_FILE"); file && *file) {
    const auto interval = std::chrono::milliseconds(env_int(env, "WEFT_METRICS_INTERVAL_MS", 5000, 100, 3600000));
    writer_ = std::thread([this, interval] { writer_loop(interval); });
    writer_.detach();  // sleeps between writes; ends with the process
    std::atexit([] { MetricsRegistry::instance().write_file(); });
  }
}

void MetricsRegistry::writer_loop(std::chrono::milliseconds interval) {
  for (;;) {
    write_file();
    std::this_thread::sleep_for(interval);
  }
}

}  // namespace weft
