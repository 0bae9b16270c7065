// NcclComm: the NCCL communicator behind one Weft communicator, created lazily on the first call
// with device buffers. Non-blocking NCCL (config.blocking = 0): no NCCL call blocks, so every wait
// is Weft's own loop, which polls ncclCommGetAsyncError, the caller's abort flag, the deadline and
// a watchdog (the store's "abort" key) and calls ncclCommAbort when any of them fires: a dead peer
// is an error, not a hang.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "collectives/collective.h"
#include "runtime/base/error.h"
#include "runtime/base/waiter.h"
#include "runtime/store/store.h"

namespace weft::nccl {

// What a wait watches besides NCCL itself.
struct WaitCtl {
  std::chrono::steady_clock::time_point deadline;
  const std::atomic<bool>* abort = nullptr;  // set by weftCommAbort
  std::function<void()> poll;                // called every ~100 ms; throws to give up (remote abort)
  std::string what;                          // names the operation in errors
};

class NcclComm {
 public:
  // Collective over the ranks of store: rank 0's ncclGetUniqueId travels through the store under
  // "nccl/uid", then ncclCommInitRankConfig on `device`.
  static std::unique_ptr<NcclComm> create(Store& store, int rank, int size, int device, const WaitCtl& ctl);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int device() const { return device_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // One collective (all-reduce, reduce-scatter, all-gather, broadcast, reduce). user_stream
  // non-null: enqueued there and this returns (CUDA stream semantics; asynchronous errors show
  // at a later call). Null: enqueued on the communicator's own stream (which orders with the
  // legacy default stream) and waited for.
  void run(const CollectiveArgs& a, const void* send, void* recv, void* user_stream, const WaitCtl& ctl);
  // Issues what `calls` enqueues on the handle between ncclGroupStart and ncclGroupEnd (several
  // collectives as one group), then waits until NCCL accepted them. Error handling as run().
  void group(const std::function<ncclResult_t(ncclComm_t)>& calls, const WaitCtl& ctl);
  // Weft's waiting loop around any condition: returns once done() is true; throws (after
  // aborting the comm) on an NCCL error, abort, watchdog, the deadline, or when done() throws.
  void wait_until(const std::function<bool()>& done, const WaitCtl& ctl);
  // Waits for stream's work with the same checks.
  void wait_stream(cudaStream_t stream, const WaitCtl& ctl);
  // The communicator's own stream (blocking: it orders with the legacy default stream).
  cudaStream_t stream() const { return stream_; }
  // ncclCommSplit: collective over every rank of this comm; color < 0 returns nullptr.
  std::unique_ptr<NcclComm> split(int color, int key, int new_rank, int new_size, const WaitCtl& ctl);
  // ncclCommAbort from any thread; the comm fails every later call.
  void abort(const std::string& why);
  // Non-empty once the comm has failed or been aborted.
  std::string failure() const;

 private:
  NcclComm(int rank, int size, int device) : rank_(rank), size_(size), device_(device) {}
  void init_stream();
  // wait_until ncclCommGetAsyncError says the comm left ncclInProgress (a non-blocking call was
  // accepted); throws (after aborting the comm) on an error, abort, watchdog or deadline.
  void settle(const WaitCtl& ctl);
  // Enqueues under mu_: calls(comm_) and its result checked.
  void issue(const std::function<ncclResult_t(ncclComm_t)>& calls, const WaitCtl& ctl);
  // One check of the comm's state, the abort flag and the deadline; throws after aborting the
  // comm. Caller holds mu_.
  void check_locked(const WaitCtl& ctl, std::chrono::steady_clock::time_point now);
  // Runs ctl.poll every kWatchdogEvery (without mu_); aborts the comm when it throws.
  void watch(const WaitCtl& ctl, std::chrono::steady_clock::time_point now, Every& poll);
  [[noreturn]] void fail_locked(ErrorCode code, const std::string& why);
  void abort_locked(const std::string& why);

  int rank_, size_, device_;
  mutable std::mutex mu_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::string failure_;
};

}  // namespace weft::nccl
