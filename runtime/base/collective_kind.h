// The collectives, by kind: shared by collectives/ (schedules, the algorithm table, the planner)
// and topology/ (plans), which must not include collectives/.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace weft {

enum class CollectiveKind : uint8_t {
  kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kBarrier, kSend, kRecv,
  kAllToAllv,  // all-to-all with per-peer counts and displacements (weftAllToAllv); last: the others keep their numbers
};
inline constexpr int kNumCollectiveKinds = 10;

// "allreduce", "reducescatter", "allgather", "broadcast", "reduce", "alltoall", "barrier", ...
inline std::string_view collective_name(CollectiveKind k) {
  static constexpr std::string_view names[] = {"allreduce", "reducescatter", "allgather", "broadcast", "reduce",
                                               "alltoall",  "barrier",       "send",      "recv",   "alltoallv"};
  const int i = static_cast<int>(k);
  return i >= 0 && i < kNumCollectiveKinds ? names[i] : std::string_view("?");
}

// The collectives that the cost model plans (allreduce .. reduce) by name.
inline std::optional<CollectiveKind> parse_collective(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(CollectiveKind::kReduce); ++i)
    if (name == collective_name(static_cast<CollectiveKind>(i))) return static_cast<CollectiveKind>(i);
  return std::nullopt;
}

// Every collective by name (allreduce .. alltoallv, not send or recv): WEFT_ALGO's sections,
// weft-topo plan.
inline std::optional<CollectiveKind> parse_any_collective(std::string_view name) {
  for (int i = 0; i < kNumCollectiveKinds; ++i) {
    const auto k = static_cast<CollectiveKind>(i);
    if (k != CollectiveKind::kSend && k != CollectiveKind::kRecv && name == collective_name(k)) return k;
  }
  return std::nullopt;
}

// Weft's schedules cut every block into slices of at most this many bytes, one message each
// (AlgoOptions::slice_bytes, WEFT_SLICE_BYTES); the cost model's predictions assume the same.
inline constexpr uint64_t kDefaultSliceBytes = 512 * 1024;

}  // namespace weft
