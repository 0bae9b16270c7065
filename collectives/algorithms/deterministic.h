// Deterministic mode (WEFT_DETERMINISTIC, weftCommSetDeterministic; docs/DETERMINISM.md): the
// algorithms whose combination order is the canonical one, and the eligibility predicate the
// algorithm choice asks once per schedule.
//
// The canonical order of a reduction over n ranks is the rank order, for every element:
// ((x_0 OP x_1) OP x_2) ... OP x_{n-1}, then the division of an average. It is what the
// shared-memory direct paths compute (ShmDirect's one round, its pieces and node-shared windows),
// and what the "det" schedules below compute whatever the size, the slicing or the channels.
#pragma once
#include <string>

#include "collectives/collective.h"

namespace weft {

// The algorithm that runs `kind` in deterministic mode when `chosen` (the user's or the automatic
// choice; may be null) was picked: `chosen` itself when its order is canonical or the collective
// reduces nothing, else the "det" row of `kind`.
const Algorithm* deterministic_algorithm(const Algorithm* chosen, CollectiveKind kind);
// Whether `kind` combines values (all-reduce, reduce-scatter, reduce).
bool reduces(CollectiveKind kind);
// For the algorithm log: why "det" ran instead of `wanted` ("" = the automatic choice).
std::string deterministic_explanation(CollectiveKind kind, const std::string& wanted);

// The schedules. All-reduce: every rank's share (part_offset of count by n) is gathered to its
// owner slice by slice, folded there in rank order (the average divided once at the end), and
// sent back to every rank. Reduce-scatter: the first half. Reduce: every rank's buffer to the
// root, folded there in rank order. The same bytes per rank as the ring for all-reduce and
// reduce-scatter, n-1 messages per slice instead of one.
void build_det_allreduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
void build_det_reducescatter(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);
void build_det_reduce(ScheduleBuilder& b, const CollectiveArgs& a, const AlgoOptions& opt);

}  // namespace weft
