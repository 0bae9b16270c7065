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
#include <string>

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
  const char* transport_name() const { return transport_->name(); }
  // Calls that took the shared-memory latency path (ShmDirect) so far.
  uint64_t direct_calls() const;

  // Validates and starts an operation. Invalid arguments throw kInvalidArgument before anything
  // is sent. Device buffers (CUDA device or managed memory; WEFT_HAVE_NCCL builds) go to NCCL,
  // host buffers to the host path. `stream` is the cudaStream_t of a kOnStream call.
  std::shared_ptr<Operation> submit(const CollectiveArgs& args, const void* send, void* recv,
                                    SubmitMode mode = SubmitMode::kBlocking, void* stream = nullptr);

  // Collective: ranks with equal color form a communicator ordered by (key, rank). color < 0
  // returns nullptr.
  std::shared_ptr<Communicator> split(int color, int key);
  // The algorithm of the collectives submitted after this call (a WEFT_ALGO id; "" = the
  // automatic choice); weft::Error(kInvalidArgument) for an id no collective has. Local: every
  // rank must set the same before the same call, as for the call's arguments.
  void set_algorithm(const std::string& id);
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

 private:
  explicit Communicator(CommInit init);
  void execute(const std::shared_ptr<Operation>& w);
  void run_host(Operation& w, std::chrono::steady_clock::time_point t0);
  // The NCCL path: creates the NCCL communicator on first use, runs w on it; a device all-reduce
  // across nodes with WEFT_GPU_HIERARCHICAL=1 takes the hierarchical path instead.
  void run_device(Operation& w, std::chrono::steady_clock::time_point t0);
  // The hierarchical path's node NCCL communicator and rail (collective over every rank).
  std::shared_ptr<nccl::Hierarchical> make_hierarchical(int device, const nccl::WaitCtl& ctl);
  // WEFT_LOG_LEVEL=info: the algorithm of the first call of each collective and size class and
  // why, then its measured time against the cost model's prediction (docs/OBSERVABILITY.md).
  void log_algorithm(const Operation& w, double us);

  CommInit init_;
  CommConfig config_;
  std::shared_ptr<Store> store_;
  Membership members_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<ShmDirect> direct_;  // the latency path, when every rank shares this node's memory
  FailureWatch failures_;
  AlgorithmChoice algorithms_;
  Executor executor_;
  ScratchPool scratch_;
  std::unique_ptr<OperationQueue> queue_;
  int split_count_ = 0;
  // One Operation reused by blocking calls while nobody else holds it (no allocation, no mutex
  // and condition variable to build and destroy per call: the latency path's per-call cost).
  std::shared_ptr<Operation> blocking_op_;
  std::atomic<bool> blocking_op_busy_{false};

  // The NCCL communicator, created by the first device-buffer call (always by the thread that
  // executes operations), or inherited from the parent's ncclCommSplit.
  std::mutex nccl_mu_;
  std::shared_ptr<nccl::NcclComm> nccl_;
  std::shared_ptr<nccl::Hierarchical> hier_;  // the hierarchical all-reduce's communicators

  std::mutex destroy_mu_;
  bool destroyed_ = false;
  // Last: its registration refers to failures_ and must end first.
  std::unique_ptr<Telemetry> telemetry_;
  FlightRecorder* recorder_ = nullptr;  // telemetry_'s, or nullptr (WEFT_TRACE_BUFFER=0)
  std::atomic<const char*> last_algorithm_{nullptr};
  CommMetrics* metrics_ = nullptr;  // telemetry_'s, or nullptr (no WEFT_METRICS_PORT / WEFT_METRICS_FILE)
};

}  // namespace weft
