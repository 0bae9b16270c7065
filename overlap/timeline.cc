#include "overlap/timeline.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/base/error.h"
#include "runtime/base/log.h"

namespace weft::overlap {

Timeline::Timeline(std::string path, int rank) : path_(std::move(path)), rank_(rank) {}

void Timeline::add(TraceEvent e) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() >= kMaxEvents) {
    ++dropped_;
    return;
  }
  events_.push_back(std::move(e));
}

std::string Timeline::rank_path(const std::string& path, int rank) {
  std::string r = std::to_string(rank);
  std::string out = path;
  bool replaced = false;
  for (const std::string ph : {"{rank}", "%r"}) {
    for (size_t p; (p = out.find(ph)) != std::string::npos;) {
      out.replace(p, ph.size(), r);
      replaced = true;
    }
  }
  if (replaced) return out;
  size_t slash = out.rfind('/');
  size_t dot = out.rfind('.');
  bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  std::string stem = has_ext ? out.substr(0, dot) : out;
  std::string ext = has_ext ? out.substr(dot) : "";
  std::string suffix = "." + r;
  if (stem.size() > suffix.size() && stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0) return out;
  return stem + suffix + ext;
}

void Timeline::write() {
  if (!enabled()) return;
  using nlohmann::json;
  std::lock_guard<std::mutex> lock(mu_);
  json events = json::array();
  static const char* kTracks[] = {"step", "backward compute", "bucket fill", "all-reduce"};
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", 0},
                    {"args", {{"name", "weft rank " + std::to_string(rank_)}}}});
  for (int t = 0; t < 4; ++t) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", t}, {"args", {{"name", kTracks[t]}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", rank_}, {"tid", t}, {"args", {{"sort_index", t}}}});
  }
  auto us = [](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count();
  };
  for (const TraceEvent& e : events_) {
    json j = {{"name", e.name}, {"cat", e.category}, {"ph", "X"}, {"pid", rank_}, {"tid", static_cast<int>(e.track)},
              {"ts", us(e.begin)}, {"dur", std::max(0.0, us(e.end) - us(e.begin))}};
    if (!e.args_json.empty()) j["args"] = json::parse(e.args_json);
    events.push_back(std::move(j));
  }
  json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"},
              {"otherData", {{"producer", "weft overlap reducer"}, {"rank", rank_}, {"dropped_events", dropped_}}}};
  std::ofstream f(path_, std::ios::trunc);
  if (!f) fail(ErrorCode::kSystemError, "timeline: cannot open {} for writing", path_);
  f << doc.dump() << '\n';
  if (!f.flush()) fail(ErrorCode::kSystemError, "timeline: writing {} failed", path_);
  WEFT_LOG_DEBUG("timeline: wrote {} events to {}", events_.size(), path_);
}

}  // namespace weft::overlap
