// The one interface through which the dispatcher reports a call that ended well (the observe step
// of admit -> choose -> run -> observe). The flight recorder, the metrics and the algorithm log
// implement it; the communicator holds the ones that are on, and tells each in turn.
#pragma once
#include <chrono>
#include <cstdint>

#include "collectives/collective.h"

namespace weft {

struct CallEnd {
  const CollectiveArgs& args;
  const char* algorithm;    // what ran: an algorithm table id, "nccl", "p2p"
  const Algorithm* forced;  // the row WEFT_ALGO / weftCommSetAlgorithm forced for it, or nullptr
  uint64_t seq = 0, record = 0;
  int nranks = 1;
  std::chrono::steady_clock::time_point t0, t1;  // started (as far as timing goes) and ended
  // The call's size as metrics and nccl-tests count it: the whole buffer for all-gather,
  // reduce-scatter and all-to-all.
  uint64_t bytes() const {
    const bool per_rank = args.kind == CollectiveKind::kReduceScatter || args.kind == CollectiveKind::kAllGather ||
                          args.kind == CollectiveKind::kAllToAll;
    return args.count * dtype_size(args.dtype) * (per_rank ? static_cast<uint64_t>(nranks) : 1);
  }
};

class CallObserver {
 public:
  virtual ~CallObserver() = default;
  virtual void call_ended(const CallEnd& e) = 0;
};

}  // namespace weft
