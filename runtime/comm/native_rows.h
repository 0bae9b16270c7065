// The runtime half of the algorithm table's native rows: their runners, bound by id to a
// communicator's shared-memory direct path (the table's rows, their eligibility and predictions
// are in collectives/: collectives/algorithms/direct.cc). collectives/ never sees a transport;
// this registry is where a native row meets the code that runs it.
#pragma once
#include <vector>

#include "collectives/collective.h"
#include "runtime/transport/shm/shm_direct.h"

namespace weft {

class NativeRows {
 public:
  // Binds every native row of the table to `direct` (nullptr: the communicator has no direct
  // path; no native row is then eligible, CallShape::node_memory being false). A native row the
  // runtime has no runner for is an internal error here, at start-up, not at its first call.
  explicit NativeRows(ShmDirect* direct);
  // Runs `row` (a native row whose eligibility took the call). False when it declined having run
  // nothing, every rank alike (the window row where some rank's buffers are not windows): the
  // dispatcher tries the next row of the chain.
  bool run(const Algorithm& row, const CollectiveArgs& a, const void* send, void* recv, const DirectContext& ctx) const {
    return runners_[static_cast<size_t>(&row - table_)](*direct_, a, send, recv, ctx);
  }

 private:
  using Runner = bool (*)(ShmDirect&, const CollectiveArgs&, const void*, void*, const DirectContext&);
  ShmDirect* direct_;
  const Algorithm* table_;       // algorithm_table().data(): rows are found by their index
  std::vector<Runner> runners_;  // per row of the table (nullptr for schedule rows)
};

}  // namespace weft
