#pragma once
#include "collectives/collective.h"

namespace weft {
// Point-to-point: one message to or from args.root.
Schedule build_p2p_schedule(const CollectiveArgs& a, int rank, int nranks);
// Dissemination barrier: ceil(log2 n) rounds; in round k rank r signals r+2^k and waits for r-2^k.
void build_dissemination_barrier(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
}  // namespace weft
