#include "runtime/base/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace weft {
namespace {

LogLevel initial_level() {
  LogLevel level = LogLevel::kWarn;
  if (const char* v = std::getenv("WEFT_LOG_LEVEL")) {
    if (!parse_log_level(v, &level)) {
      std::fprintf(stderr, "[weft] WEFT_LOG_LEVEL=%s is not one of error|warn|info|debug|trace; using warn\n", v);
    }
  }
  return level;
}

std::atomic<int>& level_storage() {
  static std::atomic<int> level{static_cast<int>(initial_level())};
  return level;
}

thread_local int t_log_rank = -1;

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(level_storage().load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { level_storage().store(static_cast<int>(level)); }
void set_log_rank(int rank) { t_log_rank = rank; }

bool parse_log_level(std::string_view text, LogLevel* out) {
  static constexpr std::pair<std::string_view, LogLevel> kNames[] = {
      {"error", LogLevel::kError}, {"warn", LogLevel::kWarn},   {"warning", LogLevel::kWarn},
      {"info", LogLevel::kInfo},   {"debug", LogLevel::kDebug}, {"trace", LogLevel::kTrace}};
  for (auto& [name, level] : kNames) {
    if (text == name) {
      *out = level;
      return true;
    }
  }
  return false;
}

void log_write(LogLevel level, std::string_view message) {
  static constexpr const char* kTags[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
  std::string line = t_log_rank >= 0 ? fmt::format("[weft r{} pid {}] {}: {}\n", t_log_rank, getpid(),
                                                   kTags[static_cast<int>(level)], message)
                                     : fmt::format("[weft pid {}] {}: {}\n", getpid(),
                                                   kTags[static_cast<int>(level)], message);
  // One write per line keeps lines from different threads and processes whole.
  ssize_t rc = ::write(STDERR_FILENO, line.data(), line.size());
  (void)rc;
}

}  // namespace weft
