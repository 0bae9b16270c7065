// Collective descriptions and the algorithm registry. One algorithm per file under
// collectives/algorithms/, each registered once in algorithms.cc with {id, description, kinds,
// build, name, predict, eligible}: schedule rows and native rows (see struct Algorithm).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/datatype.h"
#include "collectives/schedule.h"
#include "runtime/base/collective_kind.h"
#include "topology/trees.h"

namespace weft {


// An all-to-all with unequal splits (kAllToAllv, weftAllToAllv): this rank's counts and
// displacements, in elements, one of each per rank (MPI_Alltoallv's). send_counts[p] elements at
// send_displs[p] go to rank p; recv_counts[p] elements from rank p land at recv_displs[p].
struct AllToAllvSplits {
  std::vector<uint64_t> send_counts, send_displs, recv_counts, recv_displs;
  uint64_t sent() const;      // the sum of send_counts
  uint64_t received() const;  // the sum of recv_counts
};

// What every rank must agree on for one call (the signature), plus this rank's view.
struct CollectiveArgs {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  // Per NCCL's convention for each collective (recvcount, sendcount, per peer); for kAllToAllv,
  // the elements this rank sends in all (the ranks differ: not part of the signature).
  uint64_t count = 0;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = 0;   // broadcast, reduce; the peer for send/recv (kAnySource: a receive from any source)
  bool in_place = false;
  // kAllToAllv only (else null): shared and never changed, so that every copy of the arguments
  // (an operation in flight, the caller's arrays long gone) holds them.
  std::shared_ptr<const AllToAllvSplits> splits = nullptr;
};
inline constexpr int kAnySource = -1;

// Bytes of the send and receive buffers that a collective reads and writes on `rank`.
uint64_t send_bytes(const CollectiveArgs& a, int rank, int nranks);
uint64_t recv_bytes(const CollectiveArgs& a, int rank, int nranks);

// Options an algorithm may use.
struct AlgoOptions {
  uint64_t slice_bytes = kDefaultSliceBytes;  // pipelining granularity
  int channels = 1;                    // parallel rings/trees
  // Node index of every rank (empty: unknown, all on one node). The hierarchical algorithm uses it;
  // the communicator fills it from the ranks' node ids.
  std::vector<int> node_of_rank;
  // Ring position -> rank for the ring all-reduce, reduce-scatter and all-gather (empty: node_order,
  // the nodes one after the other). The planner's flat ring (planned_ring, collectives/planner.h)
  // is the order to pass, so that the ring that was explained is the ring that runs.
  std::vector<int> ring;
  // The packed spanning trees of the `forest` algorithm (the planner's packing, planned_forest,
  // collectives/planner.h): trees over the ranks, each with the share of its root's shard it
  // carries (empty: every root's half-shards along the nodes' chain, both ways).
  std::vector<topo::WeightedTree> forest;
  // float32 sums: the 16-bit type on the wire (WEFT_WIRE_DTYPE; the `f32acc` algorithm), none: float32.
  std::optional<DataType> wire;
};

// Splits n items into `parts` contiguous parts whose sizes differ by at most one; returns the
// offset of part i (i in 0..parts).
inline uint64_t part_offset(uint64_t n, uint64_t parts, uint64_t i) {
  return (n / parts) * i + std::min<uint64_t>(i, n % parts);
}

struct PlanInput;   // collectives/planner.h
struct Prediction;

// The sizes of the shared-memory direct path (runtime/transport/shm/shm_direct.*): what its
// native rows take. direct_limits() derives them from WEFT_DIRECT_BYTES and
// WEFT_DIRECT_PIECE_BYTES (-1: automatic) and whether a machine's ranks outnumber its cores.
struct DirectLimits {
  uint64_t one_round = 0;        // the largest call taken in one round (all-gather: one rank's block)
  uint64_t allreduce_round = 0;  // the largest all-reduce taken in one round (above: in pieces)
  uint64_t piece = 0;            // 0: no all-reduce in pieces
};
DirectLimits direct_limits(int64_t direct_bytes, int64_t piece_bytes, bool oversubscribed);

// What a row's eligibility looks at: the call and where it runs. The runtime fills it for each
// call; weft-topo plan and weft-sim from their options, so that they say what would run.
struct CallShape {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  uint64_t bytes = 0;        // count x type size (NCCL's count: one rank's block for all-gather)
  int nranks = 1;
  bool node_memory = false;  // every rank on one node over Weft's shared memory: the direct path exists
  DirectLimits limits;       // its sizes
  uint32_t windows = 0;      // weftMemAlloc windows allocated (the same on every rank at a call)
};

// A row of the algorithm table is one of two forms (MSCCL++'s DslAlgorithm and NativeAlgorithm
// in one collection): a schedule builder, whose schedule the executor runs over any transport,
// or a native row (build == nullptr), whose runner the runtime binds by id
// (runtime/comm/native_rows.*: the shared-memory direct path), so that collectives/ never
// depends on a transport. Both have an id WEFT_ALGO takes, a name, a prediction where the cost
// model has one, and an eligibility of their own.
struct Algorithm {
  const char* id;           // WEFT_ALGO value: "ring", "tree", "rhd", "direct", ...
  const char* description;
  std::vector<CollectiveKind> kinds;
  // Builds this rank's schedule. rank/nranks come from the builder. nullptr: a native row.
  void (*build)(ScheduleBuilder& b, const CollectiveArgs& args, const AlgoOptions& opt);
  // The name that plans print (`weft-topo plan`): "double_binary_tree" for "tree", ...
  const char* name;
  // The cost model's prediction (collectives/planner.h), or nullptr where there is none. Rows that
  // share an id share it; it returns false where it does not model in.coll or the cluster. The
  // planner ranks the predictions of the first row of each id.
  bool (*predict)(const PlanInput& in, Prediction& out);
  // Whether the row can take a call of this shape, apart from predict (nullptr: any call of its
  // kinds). The same function answers for the runtime's choice and for the tools.
  bool (*eligible)(const CallShape& s);
  bool native() const { return build == nullptr; }
  bool takes(const CallShape& s) const { return !eligible || eligible(s); }
};

const std::vector<Algorithm>& algorithm_table();
const Algorithm* find_algorithm(std::string_view id, CollectiveKind kind);
// Every algorithm that implements kind.
std::vector<const Algorithm*> algorithms_for(CollectiveKind kind);
// The default choice of a schedule row (until the topology planner decides): by size and rank count.
const Algorithm* default_algorithm(CollectiveKind kind, uint64_t bytes, int nranks);
// The native rows of kind, in table order: the order the dispatcher tries them in.
const std::vector<const Algorithm*>& native_rows(CollectiveKind kind);
// The rows a call of this shape would try, in order, up to the schedule (not included): `forced`
// first where it is a native row that takes the call, else, unless `forced` is a schedule row,
// every native row of the kind that takes it. Empty: the schedule runs at once.
struct Chain {
  const Algorithm* rows[4] = {};
  int size = 0;
  void add(const Algorithm* a) {
    if (size < 4) rows[size++] = a;
  }
};
Chain native_chain(const CallShape& s, const Algorithm* forced);

Schedule build_schedule(const Algorithm& algo, const CollectiveArgs& args, int rank, int nranks,
                        const AlgoOptions& opt);

}  // namespace weft

namespace weft {
// A 16-bit signature of what all ranks must agree on: collective kind (4 bits), type (3), op (3),
// a hash of the count (3) and of the root (3). Send and receive share one kind. Carried in
// every message's tag, so that a mismatch is caught on the first message and named.
uint16_t call_signature(const CollectiveArgs& a);
// Names the fields in which two signatures differ ("the collective (allreduce here, broadcast
// there)", "the count", ...).
std::string signature_difference(uint16_t mine, uint16_t theirs);
std::string describe_call(const CollectiveArgs& a, uint64_t seq);
}  // namespace weft
