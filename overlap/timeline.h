// A per-rank Chrome trace (chrome://tracing, Perfetto): complete ("X") events on a few named
// tracks, written as JSON with nlohmann_json.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace weft::overlap {

using Clock = std::chrono::steady_clock;

enum class Track : int { kStep = 0, kCompute = 1, kBuckets = 2, kComm = 3 };

struct TraceEvent {
  std::string name;
  std::string category;
  Track track = Track::kStep;
  Clock::time_point begin, end;
  std::string args_json;  // a JSON object as text, or empty
};

class Timeline {
 public:
  // path: the file to write ("" = disabled). rank: the trace's process id.
  Timeline(std::string path, int rank);
  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  void add(TraceEvent e);
  // Writes every event so far (the whole file is rewritten). Throws weft::Error on I/O failure.
  void write();

  // WEFT_TIMELINE's rule: "%r" or "{rank}" is replaced by the rank; a path that already ends in
  // ".<rank>.<ext>" (weftrun's per-rank paths) is kept; otherwise ".<rank>" goes before the
  // extension (or at the end when there is none).
  static std::string rank_path(const std::string& path, int rank);

  static constexpr size_t kMaxEvents = 1 << 20;  // later events are dropped (and counted)

 private:
  std::string path_;
  int rank_;
  std::mutex mu_;
  std::vector<TraceEvent> events_;
  uint64_t dropped_ = 0;
};

}  // namespace weft::overlap
