// Command-line helpers shared by weft-topo and weft-sim.
#pragma once
#include <cctype>
#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "collectives/collective.h"
#include "runtime/base/config.h"
#include "runtime/base/error.h"
#include "topology/cost.h"

namespace weft::tool {

// "4096", "64K", "16M", "1G", "2GiB", "1.5M" (binary multiples).
inline size_t parse_size(const std::string& text) {
  std::string_view s = text;
  double value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || value < 0) fail(ErrorCode::kInvalidArgument, "bad size '{}'", text);
  std::string suffix(ptr, s.data() + s.size());
  for (auto& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (suffix == "" || suffix == "B") mult = 1;
  else if (suffix == "K" || suffix == "KB" || suffix == "KIB") mult = 1024.0;
  else if (suffix == "M" || suffix == "MB" || suffix == "MIB") mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GB" || suffix == "GIB") mult = 1024.0 * 1024 * 1024;
  else fail(ErrorCode::kInvalidArgument, "bad size suffix in '{}' (use K, M or G)", text);
  const double bytes = value * mult;
  if (bytes > 1e15) fail(ErrorCode::kInvalidArgument, "size '{}' is too large", text);
  return static_cast<size_t>(bytes);
}

// "a,b,c" -> {"a", "b", "c"} (empty items refused, naming the list).
inline std::vector<std::string> split_list(const std::string& text, const char* what) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(',', start);
    std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (item.empty()) fail(ErrorCode::kInvalidArgument, "{} '{}': an empty item", what, text);
    out.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

// The direct path's sizes a job here would use: WEFT_DIRECT_BYTES and WEFT_DIRECT_PIECE_BYTES
// (as the runtime reads them), and whether the model's machine has more ranks than cores.
inline DirectLimits env_direct_limits(const topo::CostModel& model) {
  const CommConfig c = CommConfig::from_env(process_env());
  return direct_limits(c.direct_bytes, c.direct_piece_bytes, model.host.oversubscribed());
}

// 268435456 -> "256 MiB"
inline std::string size_label(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  return fmt::format("{:g} {}", bytes, units[u]);
}

}  // namespace weft::tool
