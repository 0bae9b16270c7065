// ProcessGroupWeft: the `weft` backend of torch.distributed (PyTorch 1.13's c10d::ProcessGroup).
//
// Every collective validates its tensors on the caller's thread (CPU, strided, a Weft data type,
// matching sizes; TORCH_CHECK, so a Python RuntimeError), stages non-contiguous tensors through
// contiguous copies, and submits one asynchronous operation to the Weft communicator, which runs
// operations in program order on its progress thread. The returned WorkWeft holds the Weft
// request; a completion thread takes the requests in the same order, waits on each (weft::Operation),
// copies staged results back, and then completes the torch Work and its Future (DDP's reducer
// waits on the Future). A Weft error becomes the Work's exception: Work.wait() and Future.wait()
// raise RuntimeError with Weft's message.
#pragma once
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/comm/communicator.h"

namespace weft::torch_backend {

class WorkWeft : public c10d::Work {
 public:
  WorkWeft(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);

  // isCompleted/isSuccess/wait/exception are c10d::Work's, over the state that complete() sets.
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // A receive: the rank the message came from (for a receive from any source, once matched).
  int sourceRank() const override;

  // Returns t when contiguous, else a contiguous copy; with copy_back, complete() copies the result
  // into t. Either way the Work keeps the tensor alive until it completes.
  at::Tensor stage(const at::Tensor& t, bool copy_back);
  void keep(const at::Tensor& t) { keep_.push_back(t); }
  // Adds a step to run (in order) on successful completion, before the Work is marked complete.
  void then(std::function<void()> f);

 private:
  friend class ProcessGroupWeft;
  // Runs the copy-back, then finishes the Work and the Future (with the error, if any).
  void complete(std::exception_ptr error);

  std::vector<at::Tensor> outputs_;
  std::vector<std::shared_ptr<weft::Operation>> requests_;
  int source_ = -1;  // a receive's source, kept when its request is released  // Weft's operations, in order (none: empty tensors)
  std::function<void()> after_;           // copies staged results into the caller's tensors
  std::vector<at::Tensor> keep_;          // staging buffers alive until completion
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupWeft : public c10d::ProcessGroup {
 public:
  // Collective over the group: creates the Weft communicator through the group's store.
  ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~ProcessGroupWeft() override;

  // The group of a communicator made elsewhere (shrink()).
  explicit ProcessGroupWeft(std::shared_ptr<weft::Communicator> comm);

  static c10::intrusive_ptr<c10d::ProcessGroup> create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                       int size, const std::chrono::duration<float>& timeout);

  // weft_torch.shrink_group: collective over the survivors (weftCommShrink on this group's
  // communicator, exclude as there: group ranks, or nullopt for the ranks that failed). Returns
  // the new group and the rank in this group of each of its ranks. Afterwards this group refuses
  // every collective.
  static std::pair<c10::intrusive_ptr<c10d::ProcessGroup>, std::vector<int>> shrink(
      const c10::intrusive_ptr<c10d::ProcessGroup>& group, const std::optional<std::vector<int>>& exclude);

  const std::string getBackendName() const override { return "weft"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  const std::shared_ptr<weft::Communicator>& communicator() const { return comm_; }

  // Waits until every Work of every weft group of this process has completed (Weft ends each by
  // its timeout at the latest). weft_torch calls it at exit (atexit), before Python's finalization
  // would kill a completion thread that runs a Python Future callback. Call without the GIL.
  static void drain_all();

 private:
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts);
  // Submits one operation to Weft for the Work; a Weft error at submission (bad arguments, a broken
  // communicator) is raised here.
  void submit(WorkWeft& work, const CollectiveArgs& args, const void* send, void* recv);
  // Queues the Work for the completion thread.
  c10::intrusive_ptr<c10d::Work> enqueue(c10::intrusive_ptr<WorkWeft> work);
  c10::intrusive_ptr<c10d::Work> enqueue(c10::intrusive_ptr<WorkWeft> work, const CollectiveArgs& args,
                                         const void* send, void* recv) {
    submit(*work, args, send, recv);
    return enqueue(std::move(work));
  }
  // The completion thread's state, shared with it: a Future callback (a Python comm hook) may
  // drop the last reference to the group on that very thread, which then outlives the group.
  struct Completions {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<c10::intrusive_ptr<WorkWeft>> pending;
    int inflight = 0;  // queued or being completed
    bool stop = false;
  };
  static void completion_loop(const std::shared_ptr<Completions>& c, int rank);
  // Starts the completion thread and registers the group for drain_all().
  void start_completions();

  std::shared_ptr<weft::Communicator> comm_;
  std::shared_ptr<Completions> completions_ = std::make_shared<Completions>();
  std::thread completer_;
};

}  // namespace weft::torch_backend
