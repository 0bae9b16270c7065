// Communicator: a group of ranks that run collectives together. It delegates each job to a part:
// Membership (who and where the ranks are), make_transport (what carries the bytes),
// AlgorithmChoice (which algorithm and schedule), FailureWatch (broken state, remote failures,
// mismatches), OperationQueue (order, sequence numbers, the progress thread), the Executor (runs
// a schedule), and communicator_device.cc (device buffers to NCCL).
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collectives/collective.h"
#include "runtime/base/config.h"
#include "runtime/comm/algorithm_choice.h"
#include "runtime/comm/executor.h"
#include "runtime/comm/failure_watch.h"
#include "runtime/comm/membership.h"
#include "runtime/comm/operation.h"
#include "runtime/comm/operation_queue.h"
#include "runtime/comm/scratch.h"
#include "runtime/comm/transport_choice.h"
#include "runtime/store/store.h"
#include "runtime/transport/transport.h"

namespace weft {

class InprocFabric;
class ShmDirect;
class NativeRows;
class AlgorithmLog;
class CallObserver;
class Telemetry;
class FlightRecorder;
class CommMetrics;
namespace nccl {
class NcclComm;      // runtime/transport/nccl/ (only when built with NCCL)
class Hierarchical;  // runtime/transport/nccl/hierarchical.h
struct WaitCtl;
}

struct CommInit {
  std::shared_ptr<Store> store;  // scoped to this communicator (a PrefixStore is fine)
  int rank = 0, size = 1;
  TransportKind transport = TransportKind::kUcx;
  std::shared_ptr<InprocFabric> fabric;  // kInproc: shared by the thread-ranks
  std::string node_id;                   // this rank's node identity ("" = hostname)
  CommConfig config;
  std::function<void()> on_destroy;      // e.g. MPI_Finalize when Weft initialised MPI
  std::shared_ptr<void> keep_alive;      // e.g. the store server (rank 0 of the world)
  bool world = false;                    // the job's first communicator: holds the store's lifetime
  // Observability (docs/OBSERVABILITY.md): the name its flight recorder and metrics give it (the
  // same on every rank; "" = "world" for the world, else "comm"), and whether its ranks are the
  // job's (the world, torch's default group): they agree on the dump folder, their rank names the file.
  std::string name;
  bool job_ranks = false;
};

// How submit() runs a call.
enum class SubmitMode {
  kBlocking,  // returns a finished operation or throws
  kAsync,     // returns at once; wait on the operation
  // A ...Stream call: device work is enqueued on the given cudaStream_t and the call returns
  // without waiting for it; host buffers first wait for the stream. kInvalidUsage without NCCL.
  kOnStream,
};

class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  // Collective over the ranks of init: exchanges node identities and connects the transport.
  static std::shared_ptr<Communicator> create(CommInit init);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return members_.rank; }
  int size() const { return members_.size; }
  int local_rank() const { return members_.local_rank; }
  int local_size() const { return members_.local_size; }
  int node() const { return members_.node; }
  int num_nodes() const { return members_.num_nodes; }
  const Membership& members() const { return members_; }
  const CommConfig& config() const { return config_; }
  const char* transport_name() const { return transport_ ? transport_->name() : "none"; }
  // Calls that took the shared-memory latency path (ShmDirect) so far.
  uint64_t direct_calls() const;
  // weftMemAlloc / weftMemFree: collective; every rank asks for the same size. With every rank on
  // this node over shared memory, the buffers are regions of one node-shared segment and
  // all-reduces on them run without copies (ShmDirect::alloc_window); otherwise plain memory.
  void* mem_alloc(uint64_t bytes);
  void mem_free(void* p);

  // Validates and starts an operation. Invalid arguments throw kInvalidArgument before anything
  // is sent. Device buffers (CUDA device or managed memory; WEFT_HAVE_NCCL builds) go to NCCL,
  // host buffers to the host path. `stream` is the cudaStream_t of a kOnStream call. kBlocking
  // is run(): it returns nullptr once the call has finished, and throws if it failed.
  std::shared_ptr<Operation> submit(const CollectiveArgs& args, const void* send, void* recv,
                                    SubmitMode mode = SubmitMode::kBlocking, void* stream = nullptr);
  // A blocking call: returns once it has finished, throws weft::Error if it failed. A small host
  // call on an idle communicator with the latency path (ShmDirect) runs right here, without an
  // Operation, a queue hand-off or a clock read unless it has to wait.
  void run(const CollectiveArgs& args, const void* send, void* recv);

  // Collective: ranks with equal color form a communicator ordered by (key, rank). color < 0
  // returns nullptr.
  std::shared_ptr<Communicator> split(int color, int key);
  // The algorithm of the collectives submitted after this call (a WEFT_ALGO id; "" = the
  // automatic choice); weft::Error(kInvalidArgument) for an id no collective has. Local: every
  // rank must set the same before the same call, as for the call's arguments.
  void set_algorithm(const std::string& id);
  // Deterministic mode (WEFT_DETERMINISTIC; docs/DETERMINISM.md) for the collectives submitted
  // after this call: waits for those in flight first. Every rank must set the same before the
  // same call. Communicators split from this one afterwards inherit it.
  void set_deterministic(bool on);
  bool deterministic() const { return config_.deterministic; }
  // Ends every operation in flight or queued with an error; the communicator is broken after.
  // `why` is what this rank and its peers report.
  void abort(const std::string& why = "aborted by weftCommAbort");
  bool broken() const { return failures_.broken(); }
  std::string last_error() const { return failures_.last_error(); }
  void set_last_error(const std::string& e) { failures_.set_last_error(e); }
  // Waits for queued operations, then releases the transport.
  void destroy();
  // Writes the flight recorder of every communicator of this process (weftCommDump); returns the
  // file's path, "" when WEFT_TRACE_BUFFER=0 or it could not be written (logged).
  std::string dump(const std::string& reason = "weftCommDump");
  const std::string& name() const { return init_.name; }
  // The algorithm of the last operation that ran: an algorithm table id, "direct" (the latency
  // path), "p2p", "nccl"; "" before the first.
  const char* last_algorithm() const {
    const char* a = last_algorithm_.load(std::memory_order_relaxed);
    return a ? a : "";
  }

  // weftCommShrink (shrink.cc, the protocol in shrink.h): collective over the survivors. Returns
  // the communicator of the ranks that are not excluded, numbered densely in their order here:
  // `exclude` (every survivor passes the same list), or nullopt for the ranks this communicator
  // saw fail, agreed among the survivors. Works on a broken and on a healthy communicator (which
  // finishes its queued operations first). Afterwards this one can only be destroyed; its
  // transport is released at once.
  std::shared_ptr<Communicator> shrink(const std::optional<std::vector<int>>& exclude);
  // The ranks known to have died: the store's death markers and what the transport saw.
  std::vector<int> failed_ranks();
  bool shrunk() const { return shrunk_.load(std::memory_order_acquire); }
  // For a communicator made by shrink(): the rank each of its ranks had in the one shrunk.
  const std::vector<int>& shrunk_from() const { return shrunk_from_; }

 private:
  explicit Communicator(CommInit init);
  Engine engine();  // the progress engine's hooks into this communicator
  // Validates the call and checks that the communicator can take it; returns the call with its
  // in-place flag set, and the CUDA device of its buffers (-1: host).
  CollectiveArgs admit(const CollectiveArgs& args, const void* send, const void* recv, SubmitMode mode, void* stream,
                       bool& on_stream, int& device);
  // Runs w to its end on this thread (the paths that do not run in flight, and every blocking
  // call on an idle communicator); `others` drives the operations in flight while it waits.
  void execute(const std::shared_ptr<Operation>& w, const std::function<bool()>& others);
  // The progress engine's start of w: a schedule goes in flight (ScheduledOp, dispatch.cc);
  // false for the paths that run alone (latency path, windows (weftMemAlloc), NCCL).
  bool begin(const std::shared_ptr<Operation>& w, std::unique_ptr<InFlight>& out);
  class ScheduledOp;
  friend class ScheduledOp;
  // Scratch for the schedules in flight, one pool each, reused.
  std::unique_ptr<ScratchPool> take_scratch();
  void give_scratch(std::unique_ptr<ScratchPool> s);
  // One host call on its way through the dispatcher (the inline path has no Operation).
  struct Call {
    const CollectiveArgs& args;
    const void* send;
    void* recv;
    uint64_t seq, record;
    uint16_t tag_seq;
    const Algorithm* forced;  // WEFT_ALGO / weftCommSetAlgorithm's row for it, or nullptr
    std::chrono::steady_clock::time_point start;  // zero on the inline path until a wait reads the clock
    const std::function<bool()>& others;          // drives the operations in flight while it waits
  };
  // The native rows that take a call, in the order they are tried (native_chain over this
  // communicator's CallShape); empty: a schedule runs it.
  Chain chain(const CollectiveArgs& a, const Algorithm* forced, uint32_t windows) const;
  // Runs the chain's rows in turn, then the schedule if every row declined; returns when the call
  // started as far as timing goes (zero: a native row that never waited, on the inline path).
  std::chrono::steady_clock::time_point run_host(const Call& call, const Chain& rows);
  // One native row (NativeRows): when its waiting began (zero if it never waited), or nullopt when
  // it declined, having run nothing.
  std::optional<std::chrono::steady_clock::time_point> run_native(const Algorithm& row, const Call& call);
  // A call that succeeded, started at t0 and ended at t1: tells every observer (the flight
  // recorder, the metrics, the algorithm log). forced: the algorithm the call was stamped with ("" = automatic).
  void observe(const CollectiveArgs& a, const Algorithm* forced, uint64_t seq, uint64_t record,
               std::chrono::steady_clock::time_point t0, std::chrono::steady_clock::time_point t1);
  // Stops the queue (after what it holds), releases NCCL, the direct path and the transport, and
  // withdraws this rank's death notice: destroy() and a successful shrink.
  void release();
  // The NCCL path: creates the NCCL communicator on first use, runs w on it; a device all-reduce
  // across nodes with WEFT_GPU_HIERARCHICAL=1 takes the hierarchical path instead.
  void run_device(Operation& w, std::chrono::steady_clock::time_point t0);
  // The hierarchical path's node NCCL communicator and rail (collective over every rank).
  std::shared_ptr<nccl::Hierarchical> make_hierarchical(int device, const nccl::WaitCtl& ctl);

  CommInit init_;
  CommConfig config_;
  std::shared_ptr<Store> store_;
  Membership members_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<ShmDirect> direct_;  // the latency path, when every rank shares this node's memory
  std::unique_ptr<NativeRows> natives_;  // the table's native rows, bound to direct_
  CallShape shape_;                      // what native rows' eligibility sees, but the call's own fields
  // The inline path's last chain (read and written only under the queue's lock, in run_inline's
  // take): a training loop calls the same shapes over and over, and the eligibility of every
  // native row, asked again per call, was a tenth of an 8 B all-reduce (0.02 of 0.18 us).
  struct ChainMemo {
    CollectiveKind kind = CollectiveKind::kAllReduce;
    uint64_t bytes = ~0ull;
    uint32_t windows = 0;
    const Algorithm* forced = nullptr;
    Chain rows;
  } inline_chain_;
  FailureWatch failures_;
  AlgorithmChoice algorithms_;
  Executor executor_;
  ScratchPool scratch_;  // the blocking calls'
  std::mutex scratch_mu_;
  std::vector<std::unique_ptr<ScratchPool>> spare_scratch_;
  std::unique_ptr<OperationQueue> queue_;
  int split_count_ = 0;
  // One Operation reused by blocking calls that take the queue (no allocation, mutex and
  // condition variable built per call); blocking calls never hand it to their caller.
  std::shared_ptr<Operation> blocking_op_;
  std::atomic<bool> blocking_op_busy_{false};

  // The NCCL communicator, created by the first device-buffer call (always by the thread that
  // executes operations), or inherited from the parent's ncclCommSplit.
  std::mutex nccl_mu_;
  std::shared_ptr<nccl::NcclComm> nccl_;
  std::shared_ptr<nccl::Hierarchical> hier_;  // the hierarchical all-reduce's communicators

  std::mutex destroy_mu_;
  std::mutex private_mem_mu_;
  std::vector<void*> private_mem_;  // weftMemAlloc's plain memory (no shared-memory path)
  struct KeptWindow {
    void* base;
    size_t bytes;
    void* mine;
  };
  std::vector<KeptWindow> kept_windows_;  // windows not freed when the direct path went (unmapped by the destructor)
  std::atomic<bool> destroyed_{false};  // set under destroy_mu_; read without it on the call path

  // weftCommShrink (shrink.cc).
  std::vector<int> local_failures() const;  // the peers the transport saw fail
  std::shared_ptr<Communicator> make_shrunk(const std::vector<int>& members, std::shared_ptr<Store> store);
  void retire();  // after a successful shrink: releases the transport, refuses every later call
  std::mutex shrink_mu_;
  int shrink_attempts_ = 0;
  std::atomic<bool> shrunk_{false};
  std::vector<int> shrunk_from_;
  // Last: its registration refers to failures_ and must end first.
  std::unique_ptr<Telemetry> telemetry_;
  FlightRecorder* recorder_ = nullptr;  // telemetry_'s, or nullptr (WEFT_TRACE_BUFFER=0)
  std::atomic<const char*> last_algorithm_{nullptr};
  CommMetrics* metrics_ = nullptr;  // telemetry_'s, or nullptr (no WEFT_METRICS_PORT / WEFT_METRICS_FILE)
  std::unique_ptr<AlgorithmLog> algorithm_log_;  // WEFT_LOG_LEVEL=info (runtime/comm/algorithm_log.h)
  // Told of every call that ended well (observe): the flight recorder and the metrics where they
  // are on, and the algorithm log.
  std::vector<CallObserver*> observers_;
};

}  // namespace weft
