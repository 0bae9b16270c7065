// Communicator: a group of ranks that run collectives together. It owns a transport, an executor,
// a schedule cache, a scratch pool and a progress thread.
//
// Progress: a blocking call on an idle communicator runs inline on the caller's thread (no
// hand-off, lowest latency). Asynchronous calls are queued, in program order, to the
// communicator's progress thread, started on first use; it runs one operation at a time in that
// order and sleeps on a condition variable when the queue is empty, so an idle communicator costs
// no CPU. While an operation waits on the network the thread spins for WEFT_SPIN_US, then yields,
// then sleeps on the transport's event fd.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

#include "collectives/collective.h"
#include "runtime/base/config.h"
#include "runtime/comm/executor.h"
#include "runtime/comm/scratch.h"
#include "runtime/store/store.h"
#include "runtime/transport/transport.h"
#include "runtime/comm/work.h"

namespace weft::topo {
struct NodeSummary;
}

namespace weft {

class InprocFabric;
namespace nccl {
class NcclComm;      // runtime/nccl/ (only when built with NCCL)
class Hierarchical;  // runtime/nccl/hierarchical.h
struct WaitCtl;
}

// kUcx: between processes — Weft's shared memory within a node and UCX across nodes, unless
// WEFT_TRANSPORT=ucx asks for UCX everywhere; kShm: shared memory within the node (UCX across);
// kInproc: thread-ranks of one process (tests).
enum class TransportKind { kUcx, kInproc, kShm };

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
};

class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  // Collective over the ranks of init: exchanges node identities and connects the transport.
  static std::shared_ptr<Communicator> create(CommInit init);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  int node() const { return node_; }
  int num_nodes() const { return num_nodes_; }
  const CommConfig& config() const { return config_; }
  const char* transport_name() const { return transport_->name(); }

  // Validates and starts an operation. Blocking calls (async=false) return a finished Work or
  // throw. Invalid arguments throw kInvalidArgument before anything is sent.
  // Device buffers (CUDA device or managed memory; WEFT_HAVE_NCCL builds) go to NCCL, host
  // buffers to the host path. on_stream (a ...Stream call): device work is enqueued on `stream`
  // (a cudaStream_t) and the call returns without waiting for it; host buffers first wait for the
  // stream. Without NCCL, on_stream is kInvalidUsage.
  std::shared_ptr<Work> submit(const CollectiveArgs& args, const void* send, void* recv, bool async,
                               void* stream = nullptr, bool on_stream = false);

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
  bool broken() const;
  std::string last_error() const;
  void set_last_error(const std::string& e);
  // Waits for queued operations, then releases the transport.
  void destroy();

 private:
  explicit Communicator(CommInit init);
  void connect();
  void execute(const std::shared_ptr<Work>& w);
  void progress_loop();
  const Schedule& schedule_for(const CollectiveArgs& args, const std::string& algo);
  const Algorithm* planned_algorithm(CollectiveKind kind, uint64_t bytes);
  void mark_broken(const std::string& why, bool tell_others);
  void check_remote_abort();
  void validate(const CollectiveArgs& a, const void* send, const void* recv) const;
  // The NCCL path: creates the NCCL communicator on first use, runs w on it; a device all-reduce
  // across nodes with WEFT_GPU_HIERARCHICAL=1 takes the hierarchical path instead.
  void run_device(Work& w, std::chrono::steady_clock::time_point t0);
  // The hierarchical path's node NCCL communicator and rail (collective over every rank).
  std::shared_ptr<nccl::Hierarchical> make_hierarchical(int device, const nccl::WaitCtl& ctl);

  CommInit init_;
  CommConfig config_;
  std::shared_ptr<Store> store_;
  int rank_, size_;
  int local_rank_ = 0, local_size_ = 1, node_ = 0, num_nodes_ = 1;
  std::string algo_;  // set_algorithm's (under queue_mu_); starts as WEFT_ALGO
  int host_ranks_ = 1, host_cores_ = 0;  // most ranks on one machine (boot id), and the cores they may use
  std::vector<int> node_of_rank_;             // node index of every rank (AlgoOptions::node_of_rank)
  std::map<std::pair<int, uint64_t>, std::string> planned_algo_;  // cost model's choice per (kind, bytes)
  std::unique_ptr<topo::NodeSummary> node_summary_;  // this node's topology, for the cost model
  std::unique_ptr<Transport> transport_;
  Executor executor_;
  ScratchPool scratch_;
  std::map<std::tuple<int, uint64_t, int, int, int, bool, std::string>, Schedule> schedules_;
  int split_count_ = 0;

  // Submission order and the queue.
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<std::shared_ptr<Work>> queue_;
  bool running_ = false;  // an operation is executing (inline or on the thread)
  bool stopping_ = false;
  std::thread thread_;
  uint64_t next_seq_ = 0;
  std::vector<uint16_t> p2p_send_seq_, p2p_recv_seq_;

  // The NCCL communicator, created by the first device-buffer call (always by the thread that
  // executes operations), or inherited from the parent's ncclCommSplit.
  std::mutex nccl_mu_;
  std::shared_ptr<nccl::NcclComm> nccl_;
  std::shared_ptr<nccl::Hierarchical> hier_;  // the hierarchical all-reduce's communicators

  std::atomic<bool> abort_{false};
  mutable std::mutex state_mu_;
  std::string broken_;      // non-empty: why the communicator is broken
  std::string last_error_;
  bool destroyed_ = false;
};

}  // namespace weft
