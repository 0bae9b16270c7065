// The overlap engine: a gradient reducer that all-reduces buckets of gradients while the backward
// pass is still running (PyTorch DDP's Reducer, for any framework). See docs/OVERLAP.md.
//
// Use: add_param() for every parameter in model (forward) order; then per step begin_step(),
// mark_ready(p) from the gradient hook of each parameter as its gradient is final, finalize().
// mark_ready() and mark_unused() may be called from several threads.
//
// Device gradients (CUDA device memory, builds with NCCL): buckets live on the device and the
// reducer works on a communication stream of its own, ordered after the producer's stream with
// events: mark_ready(p, stream) and finalize(stream) (null = the legacy default stream) never wait
// for the device. docs/OVERLAP.md, "Device gradients", says exactly what blocks.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/datatype.h"
#include "overlap/bucket_plan.h"
#include "overlap/compression.h"
#include "overlap/timeline.h"
#include "runtime/comm/communicator.h"

namespace weft::overlap {

struct ReducerOptions {
  uint64_t bucket_cap_bytes = 25ull << 20;      // PyTorch DDP's bucket_cap_mb=25
  uint64_t first_bucket_cap_bytes = 1ull << 20; // and its first bucket of 1 MiB
  bool average = true;                  // false: sum over ranks
  bool gradient_as_bucket_view = false; // the framework writes into grad_view(p); no copies
  bool find_unused = false;             // finalize() zero-fills parameters never marked
  bool rebuild_buckets = true;          // after the first synced step: buckets in ready order
  bool overlap = true;                  // false: nothing launched before finalize (baseline)
  Compression compression = Compression::kNone;  // float32 buckets only
  std::string timeline_path;            // "" = WEFT_TIMELINE (may be unset); per-rank rule applied
};

class DeviceSide;  // overlap/reducer_device.h

struct StepStats {
  uint64_t step = 0;           // 1-based count of finalize() calls
  bool synced = false;         // false: a no_sync step (nothing communicated)
  int buckets = 0;
  uint64_t wire_bytes = 0;     // bytes all-reduced per rank (before the algorithm's traffic)
  double step_ms = 0;          // begin_step -> finalize returns
  double backward_ms = 0;      // set_backward_ms(), else begin_backward/begin_step -> last mark
  double comm_ms = 0;          // sum of the buckets' all-reduce execution times
  double exposed_comm_ms = 0;  // the part of comm_ms after the last mark (not hidden by backward)
  double tail_ms = 0;          // last mark -> finalize returns (exposed comm + finalize's own work)
  double compress_ms = 0;      // time converting to and from the 16-bit wire format
  double overlap_ratio = 0;    // 1 - exposed/comm, in [0,1]; 0 when nothing was communicated
  double sync_overhead = 0;    // exposed_comm_ms / step_ms
};

struct BucketInfo {
  DataType dtype;
  uint64_t count = 0, bytes = 0, wire_bytes = 0;
  std::vector<int> params;
};

class Reducer {
 public:
  Reducer(std::shared_ptr<Communicator> comm, ReducerOptions options = {});
  ~Reducer();  // waits for buckets in flight, writes the timeline
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Registers a parameter's gradient buffer (may be null in bucket-view mode). Returns its index.
  // Only before the first step. The first non-null gradient decides host or device buckets; all
  // gradients must then be of that kind (and on that device).
  int add_param(void* grad, uint64_t count, DataType dtype, std::string name);
  // The parameter's slice of its bucket. Stable until a rebuild, which happens in the begin_step()
  // after the first synced step; the contents move with it.
  void* grad_view(int param);

  // Starts a step; sync=false is a no_sync step (gradients accumulate, nothing is communicated).
  // Implied by the first mark of a step when not called (then the step time starts there).
  void begin_step(bool sync = true);
  void begin_backward();             // optional: the backward starts now (else at begin_step)
  void set_backward_ms(double ms);   // optional: the caller's own backward compute time
  void mark_ready(int param);
  // Device gradients: the gradient is final once `stream` (a cudaStream_t; null = the legacy
  // default stream) reaches this point; the reducer's copy and all-reduce wait for it on the
  // device, not here. Host gradients: the stream is ignored.
  void mark_ready(int param, void* stream);
  void mark_unused(int param);       // no gradient this step: contributes zeros
  // Waits for every bucket, averages or sums, copies results back (copy mode). Returns the stats.
  StepStats finalize();
  // Device gradients: `stream` (null = the legacy default stream) waits, on the device, for the
  // results (an event); finalize returns without waiting for the device. finalize() is
  // finalize(nullptr).
  StepStats finalize(void* stream);
  bool on_device() const;  // buckets on the device (decided by the first non-null gradient)

  StepStats last_stats() const;
  std::vector<BucketInfo> buckets();
  std::string layout();
  uint64_t layout_generation() const;  // increases with every (re)build
  int num_params() const;
  void write_timeline();

 private:
  struct Param;
  struct Bucket;
  void build_locked(const std::vector<int>& order);
  void begin_step_locked(bool sync, Clock::time_point now);
  void mark_locked(int param, bool unused, const char* fn, void* stream = nullptr);
  void try_launch_locked();
  void launch_locked(Bucket& b, int index);
  void verify_layout_locked();
  void rebuild_order_locked();
  void check_usable_locked(const char* fn);
  [[noreturn]] void fail_locked(ErrorCode code, const std::string& message, bool abort_comm);
  StepStats compute_stats_locked(Clock::time_point end);
  void trace_step_locked(const StepStats& s, Clock::time_point fin_begin, Clock::time_point end);

  std::shared_ptr<Communicator> comm_;
  ReducerOptions opt_;
  Timeline timeline_;
  mutable std::mutex mu_;
  std::vector<Param> params_;
  std::vector<ParamSpec> specs_;
  std::vector<Bucket> buckets_;
  std::vector<BucketPlan> plans_;
  uint64_t generation_ = 0;
  bool verified_ = false;
  std::vector<int> pending_order_;  // agreed ready order, applied at the next begin_step
  bool rebuilt_ = false;
  std::string broken_;

  // The step in progress.
  bool in_step_ = false, sync_ = true;
  int next_launch_ = 0;
  int marked_ = 0;
  std::vector<int> ready_order_;
  Clock::time_point step_begin_, backward_begin_, last_mark_;  // last_mark_: the caller's last mark
  bool any_user_mark_ = false;
  double reported_backward_ms_ = -1;
  double compress_ms_ = 0;
  uint64_t steps_ = 0;
  StepStats last_;
  int grad_device_ = -2;             // -2 undecided, -1 host gradients, else their CUDA device
  std::unique_ptr<DeviceSide> dev_;  // device buckets (last: goes before the buckets' memory)
};

}  // namespace weft::overlap
