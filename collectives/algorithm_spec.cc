#include "collectives/algorithm_spec.h"

#include <algorithm>
#include <string_view>

#include "collectives/tool/tool_util.h"
#include <fmt/ranges.h>

#include "runtime/base/error.h"

namespace weft {

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

// The ids of rows, each once, in table order: "ring, tree, rhd".
std::string unique_ids(const std::vector<const Algorithm*>& rows) {
  std::vector<std::string_view> ids;
  for (const Algorithm* a : rows)
    if (std::find(ids.begin(), ids.end(), a->id) == ids.end()) ids.push_back(a->id);
  return fmt::format("{}", fmt::join(ids, ", "));
}

std::string ids_of(CollectiveKind kind) { return unique_ids(algorithms_for(kind)); }

std::string all_ids() {
  std::vector<const Algorithm*> rows;
  for (const Algorithm& a : algorithm_table()) rows.push_back(&a);
  return unique_ids(rows);
}

std::string section_names() {
  std::string out;
  for (int k = 0; k < kNumCollectiveKinds; ++k)
    if (parse_any_collective(collective_name(static_cast<CollectiveKind>(k))))
      out += (out.empty() ? "" : ", ") + std::string(collective_name(static_cast<CollectiveKind>(k)));
  return out;
}

uint64_t parse_bound(const std::string& text, const std::string& range, const char* what) {
  try {
    return tool::parse_size(text);
  } catch (const Error& e) {
    fail(ErrorCode::kInvalidArgument, "{}: bad size '{}' in the range '{}' ({})", what, text, range, e.what());
  }
}

std::string label(uint64_t bytes) { return bytes == UINT64_MAX ? "" : tool::size_label(static_cast<double>(bytes)); }

}  // namespace

AlgorithmSpec AlgorithmSpec::parse(const std::string& text, const char* what) {
  AlgorithmSpec spec;
  spec.text_ = text;
  if (text.empty()) return spec;
  if (text.find(':') == std::string::npos) {
    // Today's meaning: one id for every collective that has a row of it.
    bool any = false;
    for (int k = 0; k < kNumCollectiveKinds; ++k)
      if (const Algorithm* a = find_algorithm(text, static_cast<CollectiveKind>(k))) {
        spec.ranges_[k].push_back({0, UINT64_MAX, a});
        any = true;
      }
    if (!any)
      fail(ErrorCode::kInvalidArgument, "{}: unknown algorithm '{}' (known: {}; or collective:[low-high:]id,... "
           "such as allreduce:0-32K:direct,32K-:ring; empty for the automatic choice)", what, text, all_ids());
    return spec;
  }
  for (const std::string& section : split(text, ';')) {
    const size_t colon = section.find(':');
    if (section.empty()) fail(ErrorCode::kInvalidArgument, "{} '{}': an empty section (between ';')", what, text);
    if (colon == std::string::npos)
      fail(ErrorCode::kInvalidArgument, "{} '{}': the section '{}' names no collective (collective:[low-high:]id,...)",
           what, text, section);
    const std::string coll = section.substr(0, colon);
    const auto kind = parse_any_collective(coll);
    if (!kind) fail(ErrorCode::kInvalidArgument, "{} '{}': unknown collective '{}' (known: {})", what, text, coll, section_names());
    auto& ranges = spec.ranges_[static_cast<int>(*kind)];
    if (!ranges.empty()) fail(ErrorCode::kInvalidArgument, "{} '{}': {} has two sections", what, text, coll);
    const Algorithm* rest = nullptr;  // the entry without a range
    for (const std::string& entry : split(section.substr(colon + 1), ',')) {
      if (entry.empty()) fail(ErrorCode::kInvalidArgument, "{} '{}': an empty entry in the {} section", what, text, coll);
      const size_t c2 = entry.rfind(':');
      const std::string id = c2 == std::string::npos ? entry : entry.substr(c2 + 1);
      const Algorithm* row = find_algorithm(id, *kind);
      if (!row)
        fail(ErrorCode::kInvalidArgument, "{} '{}': {} has no algorithm '{}' (its algorithms: {})", what, text, coll, id, ids_of(*kind));
      if (c2 == std::string::npos) {
        if (rest) fail(ErrorCode::kInvalidArgument, "{} '{}': {} has two entries without a size range", what, text, coll);
        rest = row;
        continue;
      }
      const std::string range = entry.substr(0, c2);
      const size_t dash = range.find('-');
      if (dash == std::string::npos)
        fail(ErrorCode::kInvalidArgument, "{} '{}': the range '{}' is not low-high (e.g. 0-32K, 32K-)", what, text, range);
      Range r;
      r.row = row;
      r.low = parse_bound(range.substr(0, dash), range, what);
      if (dash + 1 < range.size()) r.high = parse_bound(range.substr(dash + 1), range, what);
      if (r.high <= r.low)
        fail(ErrorCode::kInvalidArgument, "{} '{}': the range '{}' is empty (its high end is not above its low end)", what, text, range);
      for (const Range& o : ranges)
        if (r.low < o.high && o.low < r.high)
          fail(ErrorCode::kInvalidArgument, "{} '{}': the {} ranges '{}' and {}-{} overlap", what, text, coll, range,
               label(o.low), label(o.high));
      ranges.push_back(r);
    }
    if (rest) {
      // The sizes no range names: the gaps between the ranges, in order.
      std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.low < b.low; });
      std::vector<Range> gaps;
      uint64_t at = 0;
      for (const Range& r : ranges) {
        if (r.low > at) gaps.push_back({at, r.low, rest});
        at = r.high;
      }
      if (at != UINT64_MAX) gaps.push_back({at, UINT64_MAX, rest});
      ranges.insert(ranges.end(), gaps.begin(), gaps.end());
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.low < b.low; });
  }
  return spec;
}

std::string AlgorithmSpec::describe() const {
  std::string out;
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    const auto& rs = ranges_[k];
    if (rs.empty()) continue;
    std::string parts;
    for (const Range& r : rs) {
      const std::string range = r.low == 0 && r.high == UINT64_MAX ? "" : fmt::format("{}-{}: ", label(r.low), label(r.high));
      parts += (parts.empty() ? "" : ", ") + range + r.row->id;
    }
    out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", collective_name(static_cast<CollectiveKind>(k)), parts);
  }
  return out;
}

}  // namespace weft
