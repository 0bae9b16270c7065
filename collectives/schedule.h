// A Schedule is what an algorithm produces for one rank: steps over byte ranges of three buffers
// (the caller's send and receive buffers and a scratch buffer), each step with the steps it waits
// for. One executor (runtime/comm/executor.h) runs every schedule. Schedules hold offsets, never
// pointers, so a schedule built once is replayed for every call of the same shape.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "collectives/datatype.h"

namespace weft {

enum class Buf : uint8_t { kSend = 0, kRecv = 1, kScratch = 2 };

struct Ref {
  Buf buf = Buf::kRecv;
  uint64_t offset = 0;  // bytes
};

enum class StepKind : uint8_t {
  kSend,    // send `bytes` at src to peer
  kRecv,    // receive `bytes` from peer into dst
  kReduce,  // dst = dst OP src       (elements = bytes / element size)
  kReduce3, // dst = src2 OP src      (dst may equal src2)
  kCopy,    // dst = src
  kAvg,     // dst = dst / nranks     (the last step of an average)
  // Conversions between a 16-bit type (Schedule::wire: float16 or bfloat16) and float32, for sums
  // accumulated in float32 (f32acc_allreduce.cc). `bytes` counts the 16-bit side; the float32
  // side is twice that (wide_bytes).
  kWiden,     // dst (float32) = src (16-bit), exact
  kWidenAdd,  // dst (float32) += src (16-bit), in float32
  kNarrow,    // dst (16-bit) = src (float32) rounded once, to nearest even (divided by nranks first if `divide`)
};

struct Step {
  StepKind kind;
  bool divide = false;   // kNarrow: the average's end (src / nranks, then rounded)
  int32_t peer = -1;     // kSend / kRecv
  Ref src;               // kSend, kReduce, kReduce3, kCopy
  Ref src2;              // kReduce3
  Ref dst;               // kRecv, kReduce, kReduce3, kCopy, kAvg
  uint64_t bytes = 0;
  uint32_t msg = 0;      // kSend/kRecv: index of this message between this rank and peer, per direction
  uint32_t dep_begin = 0, dep_count = 0;  // into Schedule::deps
};

// The bytes a step reads at src and writes at dst (they differ for the conversions).
inline uint64_t src_bytes(const Step& s) { return s.kind == StepKind::kNarrow ? 2 * s.bytes : s.bytes; }
inline uint64_t dst_bytes(const Step& s) {
  return s.kind == StepKind::kWiden || s.kind == StepKind::kWidenAdd ? 2 * s.bytes : s.bytes;
}

using StepId = uint32_t;
inline constexpr StepId kNoStep = 0xffffffffu;

struct Schedule {
  std::vector<Step> steps;
  std::vector<StepId> deps;
  uint64_t scratch_bytes = 0;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  DataType wire = DataType::kBfloat16;  // the 16-bit type of kWiden / kWidenAdd / kNarrow
  int nranks = 1;
  const char* algorithm = nullptr;  // the algorithm table id that built it (static), "p2p", ...
  // Filled by finalize(): reverse edges, for the executor.
  std::vector<uint32_t> dependents_begin;  // size steps+1
  std::vector<StepId> dependents;
  std::vector<uint32_t> initial_deps;      // per step
  // fused[r] for a receive r: the reduction that only consumes r's bytes (dst = other OP incoming),
  // which a transport able to reduce on delivery performs instead of landing the bytes first;
  // kNoStep otherwise. fused_other[r]: the Ref of "other".
  std::vector<StepId> fused;
  std::vector<Ref> fused_other;

  void finalize();
  // Checks the schedule against buffer sizes: every range inside its buffer, element-aligned
  // reductions, deps pointing backwards. Throws weft::Error(kInternalError) naming the step.
  void validate(uint64_t send_bytes, uint64_t recv_bytes) const;
  std::string dump() const;  // human-readable, for tests and debugging
};

// Builds a schedule; numbers messages per (peer, direction) in program order so that the k-th
// send from a to b matches the k-th receive at b from a.
class ScheduleBuilder {
 public:
  ScheduleBuilder(int rank, int nranks, DataType dtype, RedOp op);
  StepId send(int peer, Ref src, uint64_t bytes, std::initializer_list<StepId> deps = {});
  StepId recv(int peer, Ref dst, uint64_t bytes, std::initializer_list<StepId> deps = {});
  StepId reduce(Ref dst, Ref src, uint64_t bytes, std::initializer_list<StepId> deps = {});
  StepId reduce3(Ref dst, Ref a, Ref b, uint64_t bytes, std::initializer_list<StepId> deps = {});
  StepId copy(Ref dst, Ref src, uint64_t bytes, std::initializer_list<StepId> deps = {});
  StepId avg(Ref dst, uint64_t bytes, std::initializer_list<StepId> deps = {});
  // Conversions with `wire` (set_wire): `elems` elements each.
  StepId widen(Ref dst, Ref src, uint64_t elems, std::initializer_list<StepId> deps = {});
  StepId widen_add(Ref dst, Ref src, uint64_t elems, std::initializer_list<StepId> deps = {});
  StepId narrow(Ref dst, Ref src, uint64_t elems, bool divide, std::initializer_list<StepId> deps = {});
  void set_wire(DataType wire) { s_.wire = wire; }
  // Adds a dependency to an existing step (both must exist; dep < step).
  void add_dep(StepId step, StepId dep);
  void need_scratch(uint64_t bytes);
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  Schedule finish();

 private:
  StepId add(Step s, std::initializer_list<StepId> deps);
  StepId convert(StepKind kind, Ref dst, Ref src, uint64_t elems, bool divide, std::initializer_list<StepId> deps);
  int rank_, nranks_;
  Schedule s_;
  std::vector<std::vector<StepId>> step_deps_;
  std::vector<uint32_t> sent_, received_;
};

}  // namespace weft
