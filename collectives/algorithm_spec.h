// WEFT_ALGO and weftCommSetAlgorithm: which row of the algorithm table runs which calls, by
// collective and size (NCCL's and UCC's users write the same: UCC_TL_UCP_TUNE=allreduce:0-4k:@0).
//
//   ring                                   every collective that has a "ring" row (and only those)
//   allreduce:direct                       all-reduces of any size
//   allreduce:0-32K:direct,32K-:ring       by the call's size: [0, 32 KiB) direct, from 32 KiB ring
//   allreduce:0-4K:rhd,ring;broadcast:chain   sections per collective, ';' between them
//
// A size is count x type size as the call gives it (NCCL's count: one rank's block for
// all-gather and reduce-scatter); ranges are [low, high), high left out: no bound; an entry
// without a range takes the sizes no range of its section names. Suffixes K, M, G (binary).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/collective.h"

namespace weft {

class AlgorithmSpec {
 public:
  AlgorithmSpec() = default;
  // Parses text ("" = the automatic choice everywhere); weft::Error(kInvalidArgument) naming the
  // problem and `what` ("WEFT_ALGO", "weftCommSetAlgorithm") for a bad one.
  static AlgorithmSpec parse(const std::string& text, const char* what);
  // The row forced for a call of kind and bytes, or nullptr (the automatic choice).
  const Algorithm* resolve(CollectiveKind kind, uint64_t bytes) const {
    const auto& rs = ranges_[static_cast<int>(kind)];
    for (const Range& r : rs)
      if (bytes >= r.low && bytes < r.high) return r.row;
    return nullptr;
  }
  bool empty() const { return text_.empty(); }
  const std::string& text() const { return text_; }
  // The collectives it forces anything for, for the log: "allreduce (0 B-32 KiB: direct,
  // 32 KiB-: ring), broadcast (chain)".
  std::string describe() const;

 private:
  struct Range {
    uint64_t low = 0, high = UINT64_MAX;
    const Algorithm* row = nullptr;
  };
  std::string text_;
  std::array<std::vector<Range>, kNumCollectiveKinds> ranges_;
};

}  // namespace weft
