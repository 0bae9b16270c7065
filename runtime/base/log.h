// Logging to stderr, gated by WEFT_LOG_LEVEL=error|warn|info|debug|trace (default warn). Each line
// is prefixed with the rank of the calling thread's communicator ("[weft r3] ..."). Never stdout.
#pragma once
#include <fmt/format.h>

#include <string_view>

namespace weft {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
bool parse_log_level(std::string_view text, LogLevel* out);
// The rank printed in this thread's log lines (-1: none yet).
void set_log_rank(int rank);
void log_write(LogLevel level, std::string_view message);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (static_cast<int>(level) > static_cast<int>(log_level())) return;
  log_write(level, fmt::format(f, std::forward<Args>(args)...));
}

#define WEFT_LOG_ERROR(...) ::weft::log(::weft::LogLevel::kError, __VA_ARGS__)
#define WEFT_LOG_WARN(...) ::weft::log(::weft::LogLevel::kWarn, __VA_ARGS__)
#define WEFT_LOG_INFO(...) ::weft::log(::weft::LogLevel::kInfo, __VA_ARGS__)
#define WEFT_LOG_DEBUG(...) ::weft::log(::weft::LogLevel::kDebug, __VA_ARGS__)
#define WEFT_LOG_TRACE(...) ::weft::log(::weft::LogLevel::kTrace, __VA_ARGS__)

}  // namespace weft
