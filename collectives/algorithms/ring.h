#pragma once
#include "collectives/collective.h"

namespace weft {
void build_ring_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
}  // namespace weft
