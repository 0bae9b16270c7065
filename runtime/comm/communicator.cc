#include "runtime/comm/communicator.h"

#include <sys/mman.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "runtime/base/log.h"
#include "runtime/comm/algorithm_log.h"
#include "runtime/comm/arguments.h"
#include "runtime/comm/native_rows.h"
#include "runtime/transport/inproc/inproc_transport.h"
#include "runtime/transport/shm/shm_direct.h"
#include "runtime/trace/telemetry.h"
#include "weft/config.h"
#if WEFT_HAVE_NCCL
#include "runtime/transport/nccl/device.h"
#include "runtime/transport/nccl/hierarchical.h"
#include "runtime/transport/nccl/nccl_comm.h"
#endif

namespace weft {

using Clock = std::chrono::steady_clock;

Communicator::Communicator(CommInit init)
    : init_(std::move(init)),
      config_(init_.config),
      store_(init_.store),
      members_(Membership::exchange(*store_, init_.rank, init_.size, init_.node_id, config_.timeout)),
      transport_(make_transport(init_.transport, init_.fabric, store_, members_, config_)),
      failures_(store_, members_.rank, members_.size),
      algorithms_(config_, members_),
      queue_(std::make_unique<OperationQueue>(members_.rank, members_.size, AlgorithmSpec::parse(config_.algo, "WEFT_ALGO"),
                                              engine())) {
  failures_.arm_death_notice();  // if this process dies, the store tells the others
  // The latency path: all ranks on this node over Weft's shared memory (not thread-ranks, not
  // WEFT_TRANSPORT=ucx), unless WEFT_DIRECT_BYTES=0.
  // Its sizes (direct_limits): where ranks outnumber cores, larger calls in one round and
  // all-reduces of any size in pieces (docs/PERFORMANCE.md, "Latency path").
  const bool oversubscribed = members_.host_cores > 0 && members_.host_ranks > members_.host_cores;
  shape_.limits = direct_limits(config_.direct_bytes, config_.direct_piece_bytes, oversubscribed);
  shape_.nranks = size();
  if (members_.num_nodes == 1 && size() > 1 && shape_.limits.one_round > 0 && std::string(transport_->name()) == "shm") {
    direct_ = std::make_unique<ShmDirect>(*store_, rank(), size(), shape_.limits, oversubscribed, config_.spin, config_.timeout);
    shape_.node_memory = true;
  }
  natives_ = std::make_unique<NativeRows>(direct_.get());
  if (init_.name.empty()) init_.name = init_.world ? "world" : "comm";
  TelemetryInit ti;
  ti.name = init_.name;
  ti.rank = rank();
  ti.size = size();
  ti.local_rank = local_rank();
  ti.world = init_.world || init_.job_ranks;
  ti.store = store_;
  ti.timeout = config_.timeout;
  ti.trace_buffer = config_.trace_buffer;
  ti.broken = [this] { return failures_.broken_reason(); };
  ti.last_error = [this] { return failures_.last_error(); };
  telemetry_ = std::make_unique<Telemetry>(std::move(ti));
  recorder_ = telemetry_->recorder();
  metrics_ = telemetry_->metrics();
  queue_->set_recorder(recorder_);
  algorithm_log_ = std::make_unique<AlgorithmLog>(algorithms_, *telemetry_, init_.name, rank(), size());
  for (CallObserver* o : {static_cast<CallObserver*>(recorder_), static_cast<CallObserver*>(metrics_),
                          static_cast<CallObserver*>(algorithm_log_.get())})
    if (o) observers_.push_back(o);
  WEFT_LOG_INFO("communicator ready: rank {}/{} node {}/{} local {}/{} transport {}", rank(), size(), node(), num_nodes(),
                local_rank(), local_size(), transport_->name());
  if (!config_.algo.empty())
    WEFT_LOG_INFO("WEFT_ALGO={} forced for {}; the other collectives and sizes keep the automatic choice", config_.algo,
                  AlgorithmSpec::parse(config_.algo, "WEFT_ALGO").describe());
}

std::shared_ptr<Communicator> Communicator::create(CommInit init) {
  if (!init.store) fail(ErrorCode::kInvalidArgument, "communicator: no store");
  if (init.size < 1 || init.rank < 0 || init.rank >= init.size) {
    fail(ErrorCode::kInvalidArgument, "communicator: rank {} is not in a world of {}", init.rank, init.size);
  }
  AlgorithmSpec::parse(init.config.algo, "WEFT_ALGO");  // a bad spec: kInvalidArgument naming the problem
  set_log_rank(init.rank);
  return std::shared_ptr<Communicator>(new Communicator(std::move(init)));
}

Engine Communicator::engine() {
  Engine e;
  e.begin = [this](const std::shared_ptr<Operation>& w, std::unique_ptr<InFlight>& out) { return begin(w, out); };
  e.execute = [this](const std::shared_ptr<Operation>& w, const std::function<bool()>& others) { execute(w, others); };
  e.poll = [this] { return transport_->progress(); };
  e.sleep = [this](Clock::time_point until) { transport_->wait_for_event(until); };
  e.wake = [this] { transport_->interrupt(); };
  e.match_any = [this](const Operation&, const std::function<uint16_t(int)>& next_seq) {
    for (int p = 0; p < size(); ++p) {
      if (p == rank()) continue;
      const uint16_t seq = static_cast<uint16_t>(0x8000u | (next_seq(p) & 0x7fffu));
      if (transport_->probe(p, make_tag(seq, 0, 0), kTagMatchMask)) return p;
    }
    return -1;
  };
  e.timeout = config_.timeout;
  e.spin = config_.spin;
  return e;
}

Communicator::~Communicator() {
  try {
    destroy();
  } catch (const std::exception& e) {
    WEFT_LOG_WARN("communicator teardown: {}", e.what());
  }
  for (auto& k : kept_windows_) munmap(k.base, k.bytes);
  for (void* p : private_mem_) std::free(p);
}

void* Communicator::mem_alloc(uint64_t bytes) {
  if (destroyed_.load(std::memory_order_acquire)) fail(ErrorCode::kInvalidUsage, "weftMemAlloc: the communicator was destroyed");
  if (direct_) return direct_->alloc_window(*store_, bytes, config_.timeout);
  if (bytes == 0) fail(ErrorCode::kInvalidUsage, "weftMemAlloc: 0 bytes asked for");
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes) != 0) fail(ErrorCode::kSystemError, "weftMemAlloc: out of memory ({} bytes)", bytes);
  std::memset(p, 0, bytes);
  std::lock_guard<std::mutex> lock(private_mem_mu_);
  private_mem_.push_back(p);
  return p;
}

void Communicator::mem_free(void* p) {
  if (!p) return;
  if (direct_ && direct_->free_window(p)) return;
  std::lock_guard<std::mutex> lock(private_mem_mu_);
  for (auto k = kept_windows_.begin(); k != kept_windows_.end(); ++k) {
    if (k->mine == p) {
      munmap(k->base, k->bytes);
      kept_windows_.erase(k);
      return;
    }
  }
  auto it = std::find(private_mem_.begin(), private_mem_.end(), p);
  if (it == private_mem_.end()) fail(ErrorCode::kInvalidUsage, "weftMemFree: {} was not allocated by weftMemAlloc on this communicator", p);
  private_mem_.erase(it);
  std::free(p);
}

uint64_t Communicator::direct_calls() const { return direct_ ? direct_->calls() : 0; }

std::shared_ptr<Communicator> Communicator::split(int color, int key) {
  if (shrunk()) fail_shrunk("weftCommSplit");
  int id = split_count_++;
  std::string prefix = fmt::format("split{}", id);
  Bytes mine = to_bytes(fmt::format("{} {}", color, key));
  auto all = store_all_gather(*store_, prefix + "/colors", rank(), size(), mine, config_.timeout);
  std::vector<std::tuple<int, int>> members;  // (key, rank)
  for (int r = 0; r < size(); ++r) {
    int c = 0, k = 0;
    if (std::sscanf(to_string(all[r]).c_str(), "%d %d", &c, &k) != 2) fail(ErrorCode::kInternalError, "split: bad record");
    if (c == color && color >= 0) members.emplace_back(k, r);
  }
  std::sort(members.begin(), members.end());
  int new_rank = -1;
  for (size_t i = 0; i < members.size(); ++i)
    if (std::get<1>(members[i]) == rank()) new_rank = static_cast<int>(i);
  std::shared_ptr<nccl::NcclComm> child_nccl;
#if WEFT_HAVE_NCCL
  std::shared_ptr<nccl::NcclComm> parent_nccl;
  {
    std::lock_guard<std::mutex> lock(nccl_mu_);
    parent_nccl = nccl_;
  }
  if (parent_nccl) {
    // ncclCommSplit is collective over every rank of the parent and NCCL communicators are not
    // thread-safe: wait for the queued operations first. Ranks are ordered by (key, parent rank)
    // on both sides, so Weft's and NCCL's new ranks agree.
    queue_->wait_idle();
    nccl::WaitCtl ctl;
    ctl.deadline = Clock::now() + config_.timeout;
    ctl.abort = &failures_.abort_flag();
    ctl.poll = [this] { failures_.check_remote_abort(); };
    ctl.what = "weftCommSplit";
    child_nccl = parent_nccl->split(color, key, new_rank, static_cast<int>(members.size()), ctl);
  }
#endif
  if (color < 0) return nullptr;
  CommInit ci;
  ci.store = std::make_shared<PrefixStore>(store_, fmt::format("{}/c{}", prefix, color));
  ci.rank = new_rank;
  ci.size = static_cast<int>(members.size());
  ci.transport = init_.transport;
  ci.node_id = init_.node_id;
  ci.name = fmt::format("{}/split{}.c{}", init_.name, id, color);
  ci.config = config_;
  ci.config.algo = queue_->algorithm();  // the new communicator starts with this one's algorithm
  if (init_.transport == TransportKind::kInproc) {
    // Ranks of the new group share a new fabric, created by its rank 0 and found through a registry.
    ci.fabric = inproc_fabric_for(*ci.store, new_rank, ci.size, config_.timeout);
  }
  auto child = Communicator::create(std::move(ci));
  child->nccl_ = std::move(child_nccl);
  return child;
}

void Communicator::set_algorithm(const std::string& id) {
  if (shrunk()) fail_shrunk("weftCommSetAlgorithm");
  AlgorithmSpec spec = AlgorithmSpec::parse(id, "weftCommSetAlgorithm");
  if (!spec.empty())
    WEFT_LOG_INFO("algorithm '{}' forced for {}; the other collectives and sizes keep the automatic choice", id, spec.describe());
  queue_->set_algorithm(std::move(spec));
}

void Communicator::set_deterministic(bool on) {
  if (shrunk()) fail_shrunk("weftCommSetDeterministic");
  queue_->wait_idle();  // the operations submitted before keep the mode they were submitted in
  algorithms_.set_deterministic(on);
  WEFT_LOG_INFO("deterministic mode {} on {}", on ? "on" : "off", name());
}

void Communicator::abort(const std::string& why) {
  failures_.abort(why);
  if (transport_) transport_->interrupt();
#if WEFT_HAVE_NCCL
  std::shared_ptr<nccl::NcclComm> nc;
  std::shared_ptr<nccl::Hierarchical> hier;
  {
    std::lock_guard<std::mutex> lock(nccl_mu_);
    nc = nccl_;
    hier = hier_;
  }
  if (nc) nc->abort(why);  // ncclCommAbort: kernels in flight on any stream end
  if (hier) hier->abort(why);
#endif
  dump(fmt::format("aborted: {}", why));
}

std::string Communicator::dump(const std::string& reason) {
  return telemetry_ ? telemetry_->dump(reason) : std::string();
}

void Communicator::release() {
  queue_->stop();
  {
    // Nothing runs any more: the recorder leaves the process's dumps, the counters its metrics
    // (they stay allocated until the destructor: a late reader finds valid memory).
    std::lock_guard<std::mutex> lock(destroy_mu_);
    if (telemetry_) telemetry_->detach();
  }
  {
    std::lock_guard<std::mutex> lock(nccl_mu_);
    nccl_.reset();
    hier_.reset();
  }
  if (direct_) {
    std::lock_guard<std::mutex> lock(private_mem_mu_);
    for (auto& m : direct_->take_windows()) kept_windows_.push_back({m.base, m.bytes, m.mine});
  }
  direct_.reset();
  transport_.reset();
  failures_.disarm_death_notice();
}

void Communicator::destroy() {
  {
    std::lock_guard<std::mutex> lock(destroy_mu_);
    if (destroyed_) return;
    destroyed_ = true;
  }
  release();
  if (init_.world) {
    // Rank 0 serves the store: keep it up until every rank has left, or a few seconds have passed.
    try {
      store_->add("finalized", 1);
      if (init_.keep_alive) {
        auto deadline = Clock::now() + std::chrono::seconds(10);
        while (store_->add("finalized", 0) < size() && Clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    } catch (const std::exception& e) {
      WEFT_LOG_DEBUG("finalize handshake: {}", e.what());
    }
  }
  store_.reset();
  init_.store.reset();
  init_.keep_alive.reset();
  if (init_.on_destroy) init_.on_destroy();
}

}  // namespace weft
