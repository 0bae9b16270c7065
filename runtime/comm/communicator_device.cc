// Communicator's NCCL path (docs/GPU.md): the device-buffer operation, with the NCCL communicator
// created on first use, and the hierarchical all-reduce's communicators. Compiled in every build;
// without NCCL it only refuses.
#include "runtime/comm/communicator.h"

#include <map>

#include "weft/config.h"
#if WEFT_HAVE_NCCL
#include "runtime/transport/inproc/inproc_transport.h"
#include "runtime/base/log.h"
#include "runtime/transport/nccl/hierarchical.h"
#include "runtime/transport/nccl/nccl_comm.h"
#endif

namespace weft {

using Clock = std::chrono::steady_clock;

#if WEFT_HAVE_NCCL
namespace {

// The hierarchical all-reduce's rail (nccl::Rail) over a Weft host communicator.
class CommRail : public nccl::Rail {
 public:
  explicit CommRail(std::shared_ptr<Communicator> comm) : comm_(std::move(comm)) {}
  size_t start(const CollectiveArgs& args, void* buf) override {
    ops_.emplace(next_, comm_->submit(args, buf, buf, SubmitMode::kAsync));
    return next_++;
  }
  bool done(size_t id) override {
    Operation& op = *ops_.at(id);
    if (!op.test()) return false;
    if (op.failed()) throw Error(op.error_code(), op.error_message());
    return true;
  }
  void release(size_t id) override { ops_.erase(id); }
  void abort(const std::string& why) override { comm_->abort(why); }
  void destroy() override { comm_->destroy(); }

 private:
  std::shared_ptr<Communicator> comm_;
  std::map<size_t, std::shared_ptr<Operation>> ops_;
  size_t next_ = 0;
};

}  // namespace

// Called by the executing thread on the first hierarchical all-reduce, so every rank gets here in
// the same operation. The node's NCCL communicator gets its unique id through a node-scoped store
// (no NCCL communicator over all ranks is made: across nodes it could need a GPU network, and two
// "nodes" sharing one GPU in a test would make it fail); the rail is a Weft host communicator.
std::shared_ptr<nccl::Hierarchical> Communicator::make_hierarchical(int device, const nccl::WaitCtl& ctl) {
  nccl::HierLayout h = nccl::hier_layout(members_.node_of_rank, rank());
  auto node_store = std::make_shared<PrefixStore>(store_, fmt::format("hier/node{}", h.node));
  auto node = nccl::NcclComm::create(*node_store, h.local_rank, h.local_size, device, ctl);
  CommInit ci;
  ci.store = std::make_shared<PrefixStore>(store_, fmt::format("hier/rail{}", h.local_rank));
  ci.rank = h.node;
  ci.size = h.nodes;
  ci.transport = init_.transport;
  ci.node_id = init_.node_id;
  ci.config = config_;
  if (init_.transport == TransportKind::kInproc) ci.fabric = inproc_fabric_for(*ci.store, ci.rank, ci.size, config_.timeout);
  auto rail = Communicator::create(std::move(ci));
  WEFT_LOG_INFO("hierarchical all-reduce: node {}/{} local rank {}/{}, chunks of {} bytes", h.node, h.nodes, h.local_rank,
                h.local_size, config_.gpu_chunk_bytes);
  return std::make_shared<nccl::Hierarchical>(std::move(node), std::make_unique<CommRail>(std::move(rail)), h,
                                              config_.gpu_chunk_bytes);
}
#endif

void Communicator::run_device(Operation& w, Clock::time_point t0) {
#if WEFT_HAVE_NCCL
  nccl::WaitCtl ctl;
  ctl.deadline = t0 + config_.timeout;
  ctl.abort = &failures_.abort_flag();
  ctl.poll = [this] { failures_.check_remote_abort(); };
  ctl.what = describe_call(w.args_, w.seq_);
  void* stream = w.on_stream_ ? w.stream_ : nullptr;
  auto wrong_device = [&](int have) {
    fail(ErrorCode::kInvalidUsage, "{}: the buffers are on device {} but this communicator's NCCL communicator is on device {} "
         "(one device per communicator)", ctl.what, w.device_, have);
  };
  if (config_.gpu_hierarchical) {
    nccl::HierLayout h = nccl::hier_layout(members_.node_of_rank, rank());
    if (nccl::use_hierarchical(w.args_.kind, true, h)) {
      std::shared_ptr<nccl::Hierarchical> hier;
      {
        std::lock_guard<std::mutex> lock(nccl_mu_);
        hier = hier_;
      }
      if (!hier) {
        hier = make_hierarchical(w.device_, ctl);
        std::lock_guard<std::mutex> lock(nccl_mu_);
        hier_ = hier;
      }
      if (hier->device() != w.device_) wrong_device(hier->device());
      hier->all_reduce(w.args_, w.send_, w.recv_, stream, ctl);
      return;
    }
    if (w.args_.kind == CollectiveKind::kAllReduce) WEFT_LOG_DEBUG("WEFT_GPU_HIERARCHICAL=1 but {}: flat NCCL all-reduce", h.why);
  }
  std::shared_ptr<nccl::NcclComm> nc;
  {
    std::lock_guard<std::mutex> lock(nccl_mu_);
    nc = nccl_;
  }
  if (!nc) {
    // Only the executing thread gets here (one operation at a time), so there is one creation.
    nc = nccl::NcclComm::create(*store_, rank(), size(), w.device_, ctl);
    std::lock_guard<std::mutex> lock(nccl_mu_);
    nccl_ = nc;
  }
  if (nc->device() != w.device_) wrong_device(nc->device());
  nc->run(w.args_, w.send_, w.recv_, stream, ctl);
#else
  (void)t0;
  fail(ErrorCode::kInvalidUsage, "{}: device buffers need NCCL: Weft was built without it", collective_name(w.args_.kind));
#endif
}

}  // namespace weft
