#include "runtime/comm/communicator.h"

#include <sys/mman.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "runtime/base/log.h"
#include "runtime/comm/arguments.h"
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

namespace {
[[noreturn]] void fail_shrunk(std::string_view what) {
  fail(ErrorCode::kInvalidUsage, "{}: the communicator was shrunk (weftCommShrink): use the new one; this one can only be destroyed",
       what);
}
}  // namespace

Communicator::Communicator(CommInit init)
    : init_(std::move(init)),
      config_(init_.config),
      store_(init_.store),
      members_(Membership::exchange(*store_, init_.rank, init_.size, init_.node_id, config_.timeout)),
      transport_(make_transport(init_.transport, init_.fabric, store_, members_, config_)),
      failures_(store_, members_.rank, members_.size),
      algorithms_(config_, members_),
      queue_(std::make_unique<OperationQueue>(members_.rank, members_.size, config_.algo,
                                              [this](const std::shared_ptr<Operation>& w) { execute(w); })) {
  failures_.arm_death_notice();  // if this process dies, the store tells the others
  // The latency path: all ranks on this node over Weft's shared memory (not thread-ranks, not
  // WEFT_TRANSPORT=ucx), unless WEFT_DIRECT_BYTES=0.
  // Where ranks outnumber cores, every round of a scheduled algorithm waits for a core, so the
  // direct path (one round) pays off up to larger sizes (docs/PERFORMANCE.md, "Latency path").
  const bool oversubscribed = members_.host_cores > 0 && members_.host_ranks > members_.host_cores;
  const int64_t direct_bytes = config_.direct_bytes >= 0 ? config_.direct_bytes : oversubscribed ? 256 << 10 : 32 << 10;
  // Oversubscribed, larger all-reduces too, in pieces of two rounds each: 2 waits per 256 KiB
  // instead of a ring's 2(n-1) per slice; 2-5x the scheduled ring's bus bandwidth at 1 and 64 MiB
  // with 3, 4 and 8 ranks on 2 cores, but slower at 1 MiB with 2 ranks on 2 (docs/PERFORMANCE.md).
  const int64_t piece_bytes = config_.direct_piece_bytes >= 0 ? config_.direct_piece_bytes : oversubscribed ? 256 << 10 : 0;
  if (members_.num_nodes == 1 && size() > 1 && direct_bytes > 0 && std::string(transport_->name()) == "shm") {
    direct_ = std::make_unique<ShmDirect>(*store_, rank(), size(), static_cast<uint64_t>(direct_bytes),
                                          static_cast<uint64_t>(piece_bytes), oversubscribed, config_.spin, config_.timeout);
  }
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
  WEFT_LOG_INFO("communicator ready: rank {}/{} node {}/{} local {}/{} transport {}", rank(), size(), node(), num_nodes(),
                local_rank(), local_size(), transport_->name());
}

std::shared_ptr<Communicator> Communicator::create(CommInit init) {
  if (!init.store) fail(ErrorCode::kInvalidArgument, "communicator: no store");
  if (init.size < 1 || init.rank < 0 || init.rank >= init.size) {
    fail(ErrorCode::kInvalidArgument, "communicator: rank {} is not in a world of {}", init.rank, init.size);
  }
  AlgorithmChoice::check_id(init.config.algo, "WEFT_ALGO");
  set_log_rank(init.rank);
  return std::shared_ptr<Communicator>(new Communicator(std::move(init)));
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

namespace {

// Runs body; an error becomes the code and message the call reports. An argument error leaves
// nothing in flight; anything else may have, so the communicator is broken and the other ranks
// are told (unless the error came from them).
template <class Body>
std::pair<ErrorCode, std::string> guarded_call(FailureWatch& failures, const CollectiveArgs& a, uint64_t seq, Body&& body) {
  try {
    body();
    return {ErrorCode::kSuccess, {}};
  } catch (const Error& e) {
    return failures.on_failure(e, describe_call(a, seq));
  } catch (const std::exception& e) {
    failures.mark_broken(e.what(), true);
    failures.set_last_error(e.what());
    return {ErrorCode::kInternalError, e.what()};
  }
}

// A failed operation: recorded, and on the communicator's first failure (not a bad argument,
// which leaves nothing in flight) every communicator's flight recorder is dumped; the message
// then says where.
std::string record_failure(Telemetry* telemetry, FlightRecorder* rec, uint64_t record, CollectiveKind kind, ErrorCode code,
                           std::string why) {
  if (rec) rec->finished(record, Clock::now(), static_cast<int>(code));
  if (!telemetry || code == ErrorCode::kInvalidArgument) return why;
  if (CommMetrics* m = telemetry->metrics()) m->error(kind);
  const std::string path = telemetry->on_failure(why);
  if (!path.empty()) why += fmt::format(" [flight recorder: {}; run weft-doctor {}]", path, path.substr(0, path.rfind('/')));
  return why;
}

}  // namespace

CollectiveArgs Communicator::admit(const CollectiveArgs& args_in, const void* send, const void* recv, SubmitMode mode,
                                   void* stream, bool& on_stream, int& device) {
  const CollectiveArgs args = with_in_place(args_in, send, recv, rank());
  check_arguments(args, send, recv, rank(), size());
  on_stream = mode == SubmitMode::kOnStream;
  device = -1;
#if WEFT_HAVE_NCCL
  device = nccl::device_of_call(args, send, recv);
  if (on_stream && device < 0) {
    // Host buffers on a stream call: whatever the stream was computing into them finishes first.
    if (nccl::device_count() > 0) nccl::cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
    on_stream = false;
  }
#else
  (void)stream;
  if (on_stream) fail(ErrorCode::kInvalidUsage, "{}: stream calls need device buffers: Weft was built without NCCL", collective_name(args.kind));
#endif
  // No lock per call: a call racing destroy() on another thread is the caller's error either way.
  if (destroyed_.load(std::memory_order_acquire))
    fail(ErrorCode::kInvalidUsage, "{}: the communicator was destroyed", collective_name(args.kind));
  if (shrunk()) fail_shrunk(collective_name(args.kind));
  if (failures_.broken())
    fail(ErrorCode::kRemoteError, "{}: the communicator is broken: {}", collective_name(args.kind), failures_.broken_reason());
  return args;
}

void Communicator::run(const CollectiveArgs& args_in, const void* send, void* recv) {
  bool on_stream = false;
  int device = -1;
  const CollectiveArgs args = admit(args_in, send, recv, SubmitMode::kBlocking, nullptr, on_stream, device);
  if (device < 0 && direct_ && direct_->handles(args) && !direct_->prefers_window(args, direct_->windows_allocated())) {
    std::pair<ErrorCode, std::string> result;
    // Idle queue and the automatic algorithm: the call runs here (the queue numbers it).
    // Metrics and the algorithm log time the call. The flight recorder alone (on by default)
    // reads no clock: a call that finishes within its first polls is recorded untimed (two clock
    // reads would cost 0.09 us of a 0.5 us call here); one that waits gets its start from the wait
    // and its end from one more read.
    const bool ran = queue_->run_inline([&](uint64_t seq, uint64_t record) {
      FlightRecorder* const rec = recorder_;
      const bool timed = metrics_ || log_level() >= LogLevel::kInfo;
      const Clock::time_point t0 = timed ? Clock::now() : Clock::time_point{};
      if (rec) rec->started(record, seq, args, t0, false);
      Clock::time_point start = t0;
      result = guarded_call(failures_, args, seq, [&] { start = run_direct(args, send, recv, seq, record, t0); });
      if (result.first != ErrorCode::kSuccess)
        result.second = record_failure(telemetry_.get(), rec, record, args.kind, result.first, std::move(result.second));
      else if (timed || start != Clock::time_point{})
        observe(args, {}, seq, record, start, Clock::now());
      else if (rec)
        rec->finished(record, Clock::time_point{}, 0);
    });
    if (ran) {
      if (result.first != ErrorCode::kSuccess) throw Error(result.first, result.second);
      return;
    }
  }
  std::shared_ptr<Operation> w;
  const bool own = !blocking_op_busy_.exchange(true, std::memory_order_acquire);
  if (own) {
    // The cached Operation is ours while the flag is (nobody else ever holds it).
    // (The progress thread may hold the last one for a moment after finishing it.)
    if (blocking_op_ && blocking_op_.use_count() == 1) blocking_op_->reset();
    else blocking_op_ = std::make_shared<Operation>();
    w = blocking_op_;
  } else {
    w = std::make_shared<Operation>();  // another thread's blocking call holds it
  }
  struct Release {
    std::atomic<bool>* flag;
    ~Release() {
      if (flag) flag->store(false, std::memory_order_release);
    }
  } release{own ? &blocking_op_busy_ : nullptr};
  w->args_ = args;
  w->send_ = send;
  w->recv_ = recv;
  w->device_ = device;
  w->windows_ = direct_ ? direct_->windows_allocated() : 0;
  queue_->submit(w, false);
  if (w->code_ != ErrorCode::kSuccess) throw Error(w->code_, w->message_);
}

std::shared_ptr<Operation> Communicator::submit(const CollectiveArgs& args_in, const void* send, void* recv, SubmitMode mode,
                                                void* stream) {
  if (mode == SubmitMode::kBlocking) {
    run(args_in, send, recv);
    return nullptr;
  }
  bool on_stream = false;
  int device = -1;
  const CollectiveArgs args = admit(args_in, send, recv, mode, stream, on_stream, device);
  auto w = std::make_shared<Operation>();
  w->args_ = args;
  w->send_ = send;
  w->recv_ = recv;
  w->device_ = device;
  w->windows_ = direct_ ? direct_->windows_allocated() : 0;
  w->stream_ = stream;
  w->on_stream_ = on_stream;
  queue_->submit(w, mode == SubmitMode::kAsync);
  if (mode != SubmitMode::kAsync && w->code_ != ErrorCode::kSuccess) throw Error(w->code_, w->message_);
  return w;
}


void Communicator::execute(const std::shared_ptr<Operation>& w) {
  const auto t0 = Clock::now();
  w->started_at_ = t0;
  FlightRecorder* const rec = recorder_;
  if (rec) rec->started(w->record_, w->seq_, w->args_, t0, w->queued_);
  const CollectiveArgs& a = w->args_;
  auto [code, why] = guarded_call(failures_, a, w->seq_, [&] {
    if (failures_.broken())
      fail(ErrorCode::kRemoteError, "{}: the communicator is broken: {}", collective_name(a.kind), failures_.broken_reason());
    if (failures_.aborted()) fail(ErrorCode::kRemoteError, "{}: aborted (weftCommAbort)", collective_name(a.kind));
    if (w->device_ >= 0) {
      if (rec) rec->algorithm(w->record_, "nccl");
      last_algorithm_.store("nccl", std::memory_order_relaxed);
      run_device(*w, t0);
    } else {
      run_host(*w, t0);
    }
  });
  if (code == ErrorCode::kSuccess) {
    const auto t1 = Clock::now();
    observe(a, w->algo_, w->seq_, w->record_, t0, t1);
    w->finish(ErrorCode::kSuccess, {}, t1);
  } else {
    w->finish(code, record_failure(telemetry_.get(), rec, w->record_, a.kind, code, std::move(why)));
  }
}

void Communicator::observe(const CollectiveArgs& a, const std::string& forced, uint64_t seq, uint64_t record,
                           Clock::time_point t0, Clock::time_point t1) {
  if (recorder_) recorder_->finished(record, t1, 0);
  if (metrics_) {
    const bool per_rank = a.kind == CollectiveKind::kReduceScatter || a.kind == CollectiveKind::kAllGather ||
                          a.kind == CollectiveKind::kAllToAll;
    metrics_->observe(a.kind, last_algorithm(), a.count * dtype_size(a.dtype) * (per_rank ? size() : 1),
                      std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
  }
  if (log_level() >= LogLevel::kInfo) log_algorithm(a, forced, seq, std::chrono::duration<double, std::micro>(t1 - t0).count());
}

Clock::time_point Communicator::run_direct(const CollectiveArgs& a, const void* send, void* recv, uint64_t seq,
                                           uint64_t record, Clock::time_point start, bool window, bool* ran) {
  if (failures_.aborted()) fail(ErrorCode::kRemoteError, "{}: aborted (weftCommAbort)", collective_name(a.kind));
  DirectContext ctx;
  ctx.start = start;
  ctx.timeout = config_.timeout;
  ctx.abort = &failures_.abort_flag();
  ctx.signature = call_signature(a);
  ctx.transport = transport_.get();
  // The watchdog's mismatch check starts after a second of waiting (SignatureCheck), so it is
  // made only when the watchdog first runs. One pointer captured: no allocation per call.
  struct Watch {
    FailureWatch& failures;
    const CollectiveArgs& a;
    const DirectContext& ctx;
    uint64_t seq;
    std::optional<FailureWatch::SignatureCheck> check;
  } watch{failures_, a, ctx, seq, std::nullopt};
  ctx.watchdog = [w = &watch] {
    if (!w->check) w->check.emplace(w->failures, w->seq, w->ctx.signature, true, w->ctx.start);
    (*w->check)();
  };
  ctx.describe = [w = &watch] { return describe_call(w->a, w->seq); };
  static constexpr const char* kDirect = "direct";
  static constexpr const char* kShared = "shared";
  const char* algo = window ? kShared : kDirect;
  last_algorithm_.store(algo, std::memory_order_relaxed);
  if (recorder_) {
    recorder_->algorithm(record, algo);
    ctx.wait = recorder_->wait_note(record);
    if (start == Clock::time_point{}) ctx.record_start = recorder_->start_field(record);
  }
  if (window) {
    *ran = direct_->all_reduce_window(a, send, recv, ctx);
    if (!*ran) last_algorithm_.store("", std::memory_order_relaxed);
    return ctx.start;
  }
  direct_->run(a, send, recv, ctx);
  return ctx.start;
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

void Communicator::log_algorithm(const CollectiveArgs& a, const std::string& forced, uint64_t seq, double us) {
  if (!telemetry_ || a.kind == CollectiveKind::kSend || a.kind == CollectiveKind::kRecv) return;
  constexpr uint32_t kMeasured = 10;  // calls after the first, whose mean is compared with the prediction
  const std::string algo = last_algorithm();
  const uint64_t bytes = std::max(send_bytes(a, rank(), size()), recv_bytes(a, rank(), size()));
  auto& cls = telemetry_->algorithm_class(a.kind, bytes);
  const uint64_t low = bytes ? uint64_t{1} << (63 - __builtin_clzll(bytes)) : 0;
  const std::string range = low ? fmt::format("{}-{} B", low, 2 * low - 1) : std::string("0 B");
  if (cls.algorithm != algo) {  // the class's first call, or another algorithm took it over
    cls = Telemetry::AlgorithmClass{};
    cls.algorithm = algo;
    const std::string why = algorithms_.explain(a, forced, last_algorithm(), &cls.predicted_us);
    WEFT_LOG_INFO("{} on {} ({} ranks), {}: algorithm '{}' for {}: {}", collective_name(a.kind), name(), size(), range, algo,
                  describe_call(a, seq), why);
  }
  if (cls.calls == 0) cls.first_us = us;
  else cls.sum_us += us;
  if (++cls.calls != kMeasured + 1) return;
  const double mean = cls.sum_us / kMeasured;
  WEFT_LOG_INFO("{} on {}, {}: algorithm '{}' measured {:.2f} us (mean of {} calls after the first, which took {:.2f} us){}",
                collective_name(a.kind), name(), range, algo, mean, kMeasured, cls.first_us,
                cls.predicted_us >= 0 ? fmt::format(" against {:.2f} us predicted ({:.2f}x)", cls.predicted_us, mean / cls.predicted_us)
                                      : std::string(" (no prediction for it)"));
}

uint64_t Communicator::direct_calls() const { return direct_ ? direct_->calls() : 0; }

void Communicator::run_host(Operation& w, Clock::time_point t0) {
  const CollectiveArgs& a = w.args_;
  // Once the ranks have node-shared buffers (weftMemAlloc), an all-reduce past the one-round size
  // first asks whether every rank's buffers are such: then it runs without copies. The count of
  // windows is taken when the call was submitted, the same on every rank, so every rank asks alike.
  const bool window = direct_ && w.algo_.empty() && direct_->prefers_window(a, w.windows_);
  if (window) {
    bool ran = false;
    run_direct(a, w.send_, w.recv_, w.seq_, w.record_, t0, true, &ran);
    if (ran) return;
  }
  if (direct_ && w.algo_.empty() && direct_->handles(a)) {
    // Small calls within the node: no schedule, no messages (ShmDirect).
    run_direct(a, w.send_, w.recv_, w.seq_, w.record_, t0);
    return;
  }
  const Schedule& s = algorithms_.schedule_for(a, w.algo_);
  ExecBuffers bufs{w.send_, w.recv_, s.scratch_bytes ? scratch_.get(s.scratch_bytes) : nullptr};
  ExecContext ctx;
  ctx.transport = transport_.get();
  ctx.seq = w.tag_seq_;
  ctx.signature = call_signature(a);
  ctx.deadline = t0 + config_.timeout;
  ctx.abort = &failures_.abort_flag();
  ctx.spin = config_.spin;
  const bool collective = a.kind != CollectiveKind::kSend && a.kind != CollectiveKind::kRecv;
  FailureWatch::SignatureCheck check(failures_, w.seq_, ctx.signature, collective, t0);
  ctx.watchdog = [&check] { check(); };
  ctx.describe = [&] { return describe_call(a, w.seq_); };
  last_algorithm_.store(s.algorithm, std::memory_order_relaxed);
  if (recorder_) {
    recorder_->algorithm(w.record_, s.algorithm);
    ctx.wait = recorder_->wait_note(w.record_);
  }
  executor_.run(s, bufs, ctx);
}

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
  AlgorithmChoice::check_id(id, "weftCommSetAlgorithm");
  queue_->set_algorithm(id);
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
