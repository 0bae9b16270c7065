#include "runtime/comm/communicator.h"

#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

#include <algorithm>

#include "collectives/algorithms/builtin.h"
#include "runtime/transport/inproc/inproc_transport.h"
#include "runtime/base/log.h"
#include "runtime/transport/shm/shm_transport.h"
#include "topology/topology.h"
#include "runtime/transport/ucx/ucx_transport.h"
#include "weft/config.h"
#if WEFT_HAVE_NCCL
#include "runtime/transport/nccl/device.h"
#include "runtime/transport/nccl/hierarchical.h"
#include "runtime/transport/nccl/nccl_comm.h"
#endif

namespace weft {

using Clock = std::chrono::steady_clock;

// ---- Work ------------------------------------------------------------------------------------

bool Work::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return done_; })) return false;
  if (code_ != ErrorCode::kSuccess) throw Error(code_, message_);
  return true;
}
bool Work::test() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}
bool Work::failed() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ && code_ != ErrorCode::kSuccess;
}
ErrorCode Work::error_code() {
  std::lock_guard<std::mutex> lock(mu_);
  return code_;
}
std::string Work::error_message() {
  std::lock_guard<std::mutex> lock(mu_);
  return message_;
}
void Work::finish(ErrorCode code, std::string message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_at_ = Clock::now();
    code_ = code;
    message_ = std::move(message);
    done_ = true;
  }
  cv_.notify_all();
}

// ---- Communicator ----------------------------------------------------------------------------

Communicator::Communicator(CommInit init)
    : init_(std::move(init)), config_(init_.config), store_(init_.store), rank_(init_.rank), size_(init_.size) {
  algo_ = config_.algo;
}

std::shared_ptr<Communicator> Communicator::create(CommInit init) {
  if (!init.store) fail(ErrorCode::kInvalidArgument, "communicator: no store");
  if (init.size < 1 || init.rank < 0 || init.rank >= init.size) {
    fail(ErrorCode::kInvalidArgument, "communicator: rank {} is not in a world of {}", init.rank, init.size);
  }
  if (!init.config.algo.empty()) {
    bool known = false;
    for (auto& a : algorithm_table()) known |= init.config.algo == a.id;
    if (!known) {
      std::string ids;
      for (auto& a : algorithm_table()) ids += std::string(ids.empty() ? "" : ", ") + a.id;
      fail(ErrorCode::kInvalidArgument, "WEFT_ALGO='{}' is not an algorithm; known: {}", init.config.algo, ids);
    }
  }
  std::shared_ptr<Communicator> c(new Communicator(std::move(init)));
  c->connect();
  return c;
}

void Communicator::connect() {
  set_log_rank(rank_);
  std::string node_id = init_.node_id;
  if (node_id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    node_id = host;
  }
  // With the node id go the machine's identity (its boot id: emulated nodes on one machine share
  // it) and the cores this process may use: the cost model charges the CPU that ranks on one
  // machine queue for when they outnumber its cores (topo::HostCpu).
  std::string machine;
  {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::getline(in, machine);
    if (machine.empty()) {
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      machine = host;
    }
  }
  int cores = 0;
  {
    cpu_set_t set;
    CPU_ZERO(&set);
    cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (cores <= 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  }
  auto gathered = store_all_gather(*store_, "node", rank_, size_, to_bytes(node_id + '\n' + machine + '\n' + std::to_string(cores)),
                                   config_.timeout);
  std::vector<Bytes> ids(size_);
  std::map<std::string, std::pair<int, int>> machines;  // ranks, fewest cores
  for (int r = 0; r < size_; ++r) {
    std::string v = to_string(gathered[r]);
    const size_t b = v.rfind('\n'), a = b == std::string::npos ? b : v.rfind('\n', b - 1);
    if (a == std::string::npos) fail(ErrorCode::kInternalError, "rank {} published a malformed node record", r);
    ids[r] = to_bytes(v.substr(0, a));
    auto& m = machines.try_emplace(v.substr(a + 1, b - a - 1), 0, 1 << 30).first->second;
    m.first++;
    m.second = std::min(m.second, std::atoi(v.c_str() + b + 1));
  }
  for (const auto& [id, m] : machines)
    if (m.first > host_ranks_) host_ranks_ = m.first, host_cores_ = m.second;
  std::vector<std::string> nodes;
  local_rank_ = 0;
  local_size_ = 0;
  for (int r = 0; r < size_; ++r) {
    std::string id = to_string(ids[r]);
    if (std::find(nodes.begin(), nodes.end(), id) == nodes.end()) nodes.push_back(id);
    if (id == node_id) {
      if (r < rank_) local_rank_++;
      local_size_++;
    }
  }
  num_nodes_ = static_cast<int>(nodes.size());
  node_of_rank_.assign(size_, 0);
  for (int r = 0; r < size_; ++r)
    node_of_rank_[r] = static_cast<int>(std::find(nodes.begin(), nodes.end(), to_string(ids[r])) - nodes.begin());
  node_ = static_cast<int>(std::find(nodes.begin(), nodes.end(), node_id) - nodes.begin());
  if (init_.transport == TransportKind::kInproc) {
    if (!init_.fabric || init_.fabric->size() != size_) fail(ErrorCode::kInvalidArgument, "inproc communicator: fabric size differs");
    transport_ = std::make_unique<InprocTransport>(init_.fabric, rank_);
  } else if (init_.transport == TransportKind::kUcx && (config_.transport == "ucx" || !ShmTransport::usable())) {
    transport_ = std::make_unique<UcxTransport>(store_, rank_, size_, config_.timeout, config_.ucx_peer_errors);
  } else {
    // Weft's shared-memory transport between the ranks of a node, UCX between nodes.
    std::unique_ptr<Transport> remote;
    if (num_nodes_ > 1) {
      remote = std::make_unique<UcxTransport>(store_, rank_, size_, config_.timeout, config_.ucx_peer_errors, true);
    }
    transport_ = std::make_unique<ShmTransport>(store_, rank_, size_, node_of_rank_, std::move(remote), config_.timeout);
  }
  p2p_send_seq_.assign(size_, 0);
  p2p_recv_seq_.assign(size_, 0);
  // If this process dies, the store tells the others (their watchdog reads "abort").
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  store_->set_on_disconnect("abort", to_bytes(fmt::format("rank {} (pid {} on {}) died: its connection to the store closed "
                                                          "while the communicator was in use", rank_, getpid(), host)));
  WEFT_LOG_INFO("communicator ready: rank {}/{} node {}/{} local {}/{} transport {}", rank_, size_, node_, num_nodes_,
                local_rank_, local_size_, transport_->name());
}

Communicator::~Communicator() {
  try {
    destroy();
  } catch (const std::exception& e) {
    WEFT_LOG_WARN("communicator teardown: {}", e.what());
  }
}

bool Communicator::broken() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return !broken_.empty();
}
std::string Communicator::last_error() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return last_error_;
}
void Communicator::set_last_error(const std::string& e) {
  std::lock_guard<std::mutex> lock(state_mu_);
  last_error_ = e;
}

void Communicator::mark_broken(const std::string& why, bool tell_others) {
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (!broken_.empty()) return;
    broken_ = why;
  }
  WEFT_LOG_ERROR("communicator broken: {}", why);
  if (tell_others) {
    try {
      // First cause wins: a failure that follows another rank's report does not replace it.
      if (!store_->check("abort")) store_->set("abort", to_bytes(fmt::format("rank {} failed: {}", rank_, why)));
      // The cause is published: this process's death notice must not overwrite it later.
      store_->cancel_on_disconnect("abort");
    } catch (const std::exception& e) {
      WEFT_LOG_DEBUG("could not publish the failure to the other ranks: {}", e.what());
    }
  }
}

void Communicator::check_remote_abort() {
  if (store_->check("abort")) {
    std::string msg = to_string(store_->get("abort", std::chrono::milliseconds(1000)));
    throw Error(ErrorCode::kRemoteError, msg);
  }
}

void Communicator::validate(const CollectiveArgs& a, const void* send, const void* recv) const {
  using K = CollectiveKind;
  if (!dtype_valid(static_cast<int>(a.dtype))) {
    fail(ErrorCode::kInvalidArgument, "{}: invalid data type {}", collective_name(a.kind), static_cast<int>(a.dtype));
  }
  bool reducing = a.kind == K::kAllReduce || a.kind == K::kReduceScatter || a.kind == K::kReduce;
  if (reducing && !redop_valid(static_cast<int>(a.op))) {
    fail(ErrorCode::kInvalidArgument, "{}: invalid reduction op {}", collective_name(a.kind), static_cast<int>(a.op));
  }
  uint64_t es = dtype_size(a.dtype);
  uint64_t limit = (uint64_t{1} << 62) / es / static_cast<uint64_t>(size_);
  if (a.count > limit) {
    fail(ErrorCode::kInvalidArgument, "{}: count {} of {} overflows the addressable size", collective_name(a.kind), a.count,
         dtype_name(a.dtype));
  }
  if (a.kind == K::kBroadcast || a.kind == K::kReduce) {
    if (a.root < 0 || a.root >= size_) {
      fail(ErrorCode::kInvalidArgument, "{}: root {} is outside the communicator (0..{})", collective_name(a.kind), a.root, size_ - 1);
    }
  }
  if (a.kind == K::kSend || a.kind == K::kRecv) {
    if (a.root < 0 || a.root >= size_) {
      fail(ErrorCode::kInvalidArgument, "{}: peer {} is outside the communicator (0..{})", collective_name(a.kind), a.root, size_ - 1);
    }
    if (a.root == rank_) fail(ErrorCode::kInvalidArgument, "{}: peer {} is this rank", collective_name(a.kind), a.root);
  }
  uint64_t sb = send_bytes(a, rank_, size_), rb = recv_bytes(a, rank_, size_);
  if (sb && !send) fail(ErrorCode::kInvalidArgument, "{}: sendbuff is NULL with count {}", collective_name(a.kind), a.count);
  if (rb && !recv) fail(ErrorCode::kInvalidArgument, "{}: recvbuff is NULL with count {}", collective_name(a.kind), a.count);
  if (sb && rb && !a.in_place) {
    auto s0 = reinterpret_cast<uintptr_t>(send), r0 = reinterpret_cast<uintptr_t>(recv);
    if (s0 < r0 + rb && r0 < s0 + sb) {
      fail(ErrorCode::kInvalidArgument,
           "{}: sendbuff and recvbuff overlap but are not in place (in place means {})", collective_name(a.kind),
           a.kind == K::kReduceScatter ? "recvbuff == sendbuff + rank*recvcount"
           : a.kind == K::kAllGather   ? "sendbuff == recvbuff + rank*sendcount"
                                       : "sendbuff == recvbuff");
    }
  }
}

std::shared_ptr<Work> Communicator::submit(const CollectiveArgs& args_in, const void* send, void* recv, bool async,
                                           void* stream, bool on_stream) {
  CollectiveArgs args = args_in;
  uint64_t es = dtype_valid(static_cast<int>(args.dtype)) ? dtype_size(args.dtype) : 1;
  auto s0 = reinterpret_cast<uintptr_t>(send), r0 = reinterpret_cast<uintptr_t>(recv);
  switch (args.kind) {
    case CollectiveKind::kReduceScatter: args.in_place = send && r0 == s0 + rank_ * args.count * es; break;
    case CollectiveKind::kAllGather: args.in_place = send && s0 == r0 + rank_ * args.count * es; break;
    case CollectiveKind::kAllReduce: case CollectiveKind::kBroadcast: case CollectiveKind::kReduce:
    case CollectiveKind::kAllToAll: args.in_place = send && send == recv; break;
    default: args.in_place = false;
  }
  validate(args, send, recv);
  int device = -1;
#if WEFT_HAVE_NCCL
  device = nccl::device_of_call(args, send, recv);
  if (on_stream && device < 0) {
    // Host buffers on a stream call: whatever the stream was computing into them finishes first.
    if (nccl::device_count() > 0) nccl::cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
    on_stream = false;
  }
#else
  if (on_stream) fail(ErrorCode::kInvalidUsage, "{}: stream calls need device buffers: Weft was built without NCCL", collective_name(args.kind));
#endif
  if (on_stream && async) fail(ErrorCode::kInternalError, "{}: a stream call cannot also be asynchronous", collective_name(args.kind));
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (destroyed_) fail(ErrorCode::kInvalidUsage, "{}: the communicator was destroyed", collective_name(args.kind));
    if (!broken_.empty()) fail(ErrorCode::kRemoteError, "{}: the communicator is broken: {}", collective_name(args.kind), broken_);
  }
  auto w = std::make_shared<Work>();
  w->args_ = args;
  w->send_ = send;
  w->recv_ = recv;
  w->device_ = device;
  w->stream_ = stream;
  w->on_stream_ = on_stream;
  std::unique_lock<std::mutex> q(queue_mu_);
  w->algo_ = algo_;
  if (args.kind == CollectiveKind::kSend) {
    w->seq_ = p2p_send_seq_[args.root]++;
    w->tag_seq_ = static_cast<uint16_t>(0x8000u | (w->seq_ & 0x7fffu));
  } else if (args.kind == CollectiveKind::kRecv) {
    w->seq_ = p2p_recv_seq_[args.root]++;
    w->tag_seq_ = static_cast<uint16_t>(0x8000u | (w->seq_ & 0x7fffu));
  } else {
    w->seq_ = next_seq_++;
    w->tag_seq_ = static_cast<uint16_t>(w->seq_ & 0x7fffu);
  }
  if (!async && !running_ && queue_.empty()) {
    running_ = true;
    q.unlock();
    execute(w);
    q.lock();
    running_ = false;
    bool more = !queue_.empty();
    q.unlock();
    if (more) queue_cv_.notify_all();
    if (w->code_ != ErrorCode::kSuccess) throw Error(w->code_, w->message_);
    return w;
  }
  queue_.push_back(w);
  if (!thread_.joinable()) thread_ = std::thread([this] { progress_loop(); });
  q.unlock();
  queue_cv_.notify_all();
  if (!async) {
    while (!w->wait(std::chrono::hours(24))) {
    }
  }
  return w;
}

void Communicator::progress_loop() {
  set_log_rank(rank_);
  std::unique_lock<std::mutex> q(queue_mu_);
  for (;;) {
    queue_cv_.wait(q, [&] { return (stopping_ && queue_.empty()) || (!queue_.empty() && !running_); });
    if (queue_.empty()) break;
    auto w = queue_.front();
    queue_.pop_front();
    running_ = true;
    q.unlock();
    execute(w);
    q.lock();
    running_ = false;
    queue_cv_.notify_all();
  }
}

const Schedule& Communicator::schedule_for(const CollectiveArgs& a, const std::string& algo_id) {
  auto key = std::make_tuple(static_cast<int>(a.kind), a.count, static_cast<int>(a.dtype), static_cast<int>(a.op), a.root,
                             a.in_place, algo_id);
  auto it = schedules_.find(key);
  if (it != schedules_.end()) return it->second;
  if (schedules_.size() > 4096) schedules_.clear();
  AlgoOptions opt;
  opt.slice_bytes = config_.slice_bytes;
  opt.channels = config_.channels;
  opt.node_of_rank = node_of_rank_;
  Schedule s;
  if (a.kind == CollectiveKind::kSend || a.kind == CollectiveKind::kRecv) {
    s = build_p2p_schedule(a, rank_, size_);
  } else {
    const Algorithm* algo = nullptr;
    if (!algo_id.empty()) {
      algo = find_algorithm(algo_id, a.kind);
      if (!algo) WEFT_LOG_DEBUG("algorithm '{}' does not implement {}; using the default", algo_id, collective_name(a.kind));
    }
    const bool planned = a.kind == CollectiveKind::kAllReduce || a.kind == CollectiveKind::kReduceScatter ||
                         a.kind == CollectiveKind::kAllGather;
    if (!algo && planned && num_nodes_ > 1) {
      // The model's size is the whole buffer: the gathered or scattered one for all-gather and
      // reduce-scatter (a.count is one rank's block there), as in weft-perf and weft-topo plan.
      const uint64_t per = a.kind == CollectiveKind::kAllReduce ? 1 : static_cast<uint64_t>(size_);
      algo = planned_algorithm(a.kind, a.count * dtype_size(a.dtype) * per);
    }
    if (!algo) algo = default_algorithm(a.kind, a.count * dtype_size(a.dtype), size_);
    if (!algo) fail(ErrorCode::kInvalidUsage, "{} is not implemented yet", collective_name(a.kind));
    s = build_schedule(*algo, a, rank_, size_, opt);
  }
  return schedules_.emplace(key, std::move(s)).first->second;
}

// Across nodes (WEFT_ALGO unset) the cost model picks the all-reduce, reduce-scatter and all-gather
// algorithm over a uniform cluster view of this node type: the same function as `weft-topo plan`.
// Computed once per collective and size (schedules are cached, so only for a new shape).
const Algorithm* Communicator::planned_algorithm(CollectiveKind kind, uint64_t bytes) {
  const auto key = std::make_pair(static_cast<int>(kind), bytes);
  auto it = planned_algo_.find(key);
  if (it == planned_algo_.end()) {
    if (planned_algo_.size() > 4096) planned_algo_.clear();
    std::string id;
    const topo::Collective coll = kind == CollectiveKind::kAllGather       ? topo::Collective::kAllGather
                                  : kind == CollectiveKind::kReduceScatter ? topo::Collective::kReduceScatter
                                                                           : topo::Collective::kAllReduce;
    try {
      if (!node_summary_) node_summary_ = std::make_unique<topo::NodeSummary>(topo::summarize(topo::load_topology()));
      topo::CostModel model = topo::CostModel::from_env();
      if (model.host.ranks == 0) model.host.ranks = host_ranks_;
      if (model.host.cores == 0) model.host.cores = host_cores_;
      id = topo::choose_weft_algorithm(*node_summary_, num_nodes_, std::max(1, size_ / num_nodes_), coll, bytes, model);
    } catch (const std::exception& e) {
      WEFT_LOG_DEBUG("cost model unavailable ({}); using the default {}", e.what(), collective_name(kind));
    }
    WEFT_LOG_DEBUG("cost model: {} of {} bytes on {} nodes ({} ranks on {} cores of a machine) -> '{}'",
                   collective_name(kind), bytes, num_nodes_, host_ranks_, host_cores_, id);
    it = planned_algo_.emplace(key, id).first;
  }
  return it->second.empty() ? nullptr : find_algorithm(it->second, kind);
}

void Communicator::execute(const std::shared_ptr<Work>& w) {
  auto t0 = Clock::now();
  w->started_at_ = t0;
  const CollectiveArgs& a = w->args_;
  try {
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      if (!broken_.empty()) fail(ErrorCode::kRemoteError, "{}: the communicator is broken: {}", collective_name(a.kind), broken_);
    }
    if (abort_.load()) fail(ErrorCode::kRemoteError, "{}: aborted (weftCommAbort)", collective_name(a.kind));
    if (w->device_ >= 0) {
      run_device(*w, t0);
      w->elapsed_us_ = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      w->finish(ErrorCode::kSuccess, {});
      return;
    }
    const Schedule& s = schedule_for(a, w->algo_);
    ExecBuffers bufs{w->send_, w->recv_, s.scratch_bytes ? scratch_.get(s.scratch_bytes) : nullptr};
    ExecContext ctx;
    ctx.transport = transport_.get();
    ctx.seq = w->tag_seq_;
    ctx.signature = call_signature(a);
    ctx.deadline = t0 + config_.timeout;
    ctx.abort = &abort_;
    ctx.spin = config_.spin;
    // A mismatch that no receive can see (e.g. different roots: the ranks wait on different
    // peers) would end as a timeout. After 1 s of waiting, each rank publishes its call signature
    // and compares it with the next rank's: if the ranks differ anywhere, some neighbours differ.
    bool published = false;
    std::string sig_key = fmt::format("sig/{}/", w->seq_);
    bool collective = a.kind != CollectiveKind::kSend && a.kind != CollectiveKind::kRecv && size_ > 1;
    ctx.watchdog = [&, this] {
      check_remote_abort();
      if (!collective || Clock::now() - t0 < std::chrono::seconds(1)) return;
      if (!published) {
        store_->set(sig_key + std::to_string(rank_), to_bytes(std::to_string(ctx.signature)));
        published = true;
      }
      std::string next = sig_key + std::to_string((rank_ + 1) % size_);
      if (!store_->check(next)) return;
      Bytes value;
      try {
        value = store_->get(next, std::chrono::milliseconds(200));
      } catch (const Error& e) {
        // The next rank erased its key between check() and get(): it has finished this call.
        if (e.code() == ErrorCode::kTimeout) return;
        throw;
      }
      auto theirs = static_cast<uint16_t>(std::stoul(to_string(value)));
      if (theirs != ctx.signature) {
        fail(ErrorCode::kInvalidUsage, "mismatch with rank {}: the ranks passed different arguments: {}", (rank_ + 1) % size_,
             signature_difference(ctx.signature, theirs));
      }
    };
    ctx.describe = [&] { return describe_call(a, w->seq_); };
    auto unpublish = [&] {
      try {
        if (published) store_->erase(sig_key + std::to_string(rank_));
      } catch (const std::exception& e) {
        WEFT_LOG_DEBUG("erase {}: {}", sig_key, e.what());
      }
    };
    try {
      executor_.run(s, bufs, ctx);
    } catch (...) {
      unpublish();
      throw;
    }
    unpublish();
    w->elapsed_us_ = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    w->finish(ErrorCode::kSuccess, {});
  } catch (const Error& e) {
    // An argument error leaves nothing in flight; anything else may have, so the communicator is
    // broken and the other ranks are told (unless this error came from them).
    std::string why = e.what();
    ErrorCode code = e.code();
    if (code != ErrorCode::kInvalidArgument) {
      // Another rank's failure published first is the cause, also of a transport error seen here
      // just after it (that rank, or one that saw it, tore down its endpoints): report it, as
      // every other rank does, and do not publish this one. A timeout or a mismatch found here is
      // this rank's own finding and stays as it is.
      bool told = false;
      if (!abort_.load() && code != ErrorCode::kTimeout && code != ErrorCode::kInvalidUsage) {
        try {
          if (store_->check("abort")) {
            const std::string first = to_string(store_->get("abort", std::chrono::milliseconds(1000)));
            told = true;
            code = ErrorCode::kRemoteError;
            if (why.find(first) == std::string::npos) {
              const std::string call = describe_call(a, w->seq_);
              std::string here = why.rfind(call + ": ", 0) == 0 ? why.substr(call.size() + 2) : why;
              why = fmt::format("{}: {} (then here: {})", call, first, here);
            }
          }
        } catch (const std::exception& se) {
          WEFT_LOG_DEBUG("could not read the other ranks' failure: {}", se.what());
        }
      }
      mark_broken(why, !told && !abort_.load());
    }
    set_last_error(why);
    w->finish(code, why);
  } catch (const std::exception& e) {
    mark_broken(e.what(), true);
    set_last_error(e.what());
    w->finish(ErrorCode::kInternalError, e.what());
  }
}

std::shared_ptr<Communicator> Communicator::split(int color, int key) {
  int id = split_count_++;
  std::string prefix = fmt::format("split{}", id);
  Bytes mine = to_bytes(fmt::format("{} {}", color, key));
  auto all = store_all_gather(*store_, prefix + "/colors", rank_, size_, mine, config_.timeout);
  std::vector<std::tuple<int, int>> members;  // (key, rank)
  for (int r = 0; r < size_; ++r) {
    int c = 0, k = 0;
    if (std::sscanf(to_string(all[r]).c_str(), "%d %d", &c, &k) != 2) fail(ErrorCode::kInternalError, "split: bad record");
    if (c == color && color >= 0) members.emplace_back(k, r);
  }
  std::sort(members.begin(), members.end());
  int new_rank = -1;
  for (size_t i = 0; i < members.size(); ++i)
    if (std::get<1>(members[i]) == rank_) new_rank = static_cast<int>(i);
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
    {
      std::unique_lock<std::mutex> q(queue_mu_);
      queue_cv_.wait(q, [&] { return queue_.empty() && !running_; });
    }
    nccl::WaitCtl ctl;
    ctl.deadline = Clock::now() + config_.timeout;
    ctl.abort = &abort_;
    ctl.poll = [this] { check_remote_abort(); };
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
  ci.config = config_;
  {
    std::lock_guard<std::mutex> q(queue_mu_);
    ci.config.algo = algo_;  // the new communicator starts with this one's algorithm
  }
  if (init_.transport == TransportKind::kInproc) {
    // Ranks of the new group share a new fabric, created by its rank 0 and found through a registry.
    ci.fabric = inproc_fabric_for(*ci.store, new_rank, ci.size, config_.timeout);
  }
  auto child = Communicator::create(std::move(ci));
  child->nccl_ = std::move(child_nccl);
  return child;
}

void Communicator::set_algorithm(const std::string& id) {
  if (!id.empty()) {
    bool known = false;
    std::string ids;
    for (const auto& a : algorithm_table()) {
      known = known || id == a.id;
      if ((", " + ids).find(", " + std::string(a.id) + ", ") == std::string::npos) ids += std::string(a.id) + ", ";
    }
    if (!known) {
      ids.resize(ids.size() - 2);
      fail(ErrorCode::kInvalidArgument, "unknown algorithm '{}' (known: {}; empty for the automatic choice)", id, ids);
    }
  }
  std::lock_guard<std::mutex> q(queue_mu_);
  algo_ = id;
}

void Communicator::abort(const std::string& why) {
  abort_.store(true);
  mark_broken(why, true);
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
}

void Communicator::destroy() {
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (destroyed_) return;
    destroyed_ = true;
  }
  {
    std::lock_guard<std::mutex> q(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(nccl_mu_);
    nccl_.reset();
    hier_.reset();
  }
  transport_.reset();
  try {
    store_->cancel_on_disconnect("abort");
  } catch (const std::exception& e) {
    WEFT_LOG_DEBUG("cancel disconnect notice: {}", e.what());
  }
  if (init_.world) {
    // Rank 0 serves the store: keep it up until every rank has left, or a few seconds have passed.
    try {
      store_->add("finalized", 1);
      if (init_.keep_alive) {
        auto deadline = Clock::now() + std::chrono::seconds(10);
        while (store_->add("finalized", 0) < size_ && Clock::now() < deadline)
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
