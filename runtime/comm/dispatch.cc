// The dispatcher: one call from admission to its end. admit (arguments, the communicator's
// state) -> choose (NCCL for device buffers; else the fallback chain: the algorithm table's native
// rows whose eligibility takes the call, in table order, then a schedule row) -> run (inline on the caller's thread when the communicator is idle and the call is
// blocking; else on the progress thread: schedules in flight beside others (ScheduledOp), the
// other paths there and then) -> observe (flight recorder, metrics, the algorithm log).
#include <algorithm>
#include <optional>

#include "runtime/base/log.h"
#include "runtime/comm/arguments.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/native_rows.h"
#include "runtime/transport/shm/shm_direct.h"
#include "runtime/trace/telemetry.h"
#include "weft/config.h"
#if WEFT_HAVE_NCCL
#include "runtime/transport/nccl/device.h"
#endif

namespace weft {

using Clock = std::chrono::steady_clock;

namespace {

const std::function<bool()> kNoOthers;  // the inline path: nothing else in flight

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
  if (device < 0 && direct_) {
    // Idle queue and a native row takes the call: it runs here (the queue numbers it), the rows of
    // its chain in turn, then the schedule if every row declined. Metrics and the algorithm log
    // time the call. The flight recorder alone (on by default) reads no clock: a call that
    // finishes within its first polls is recorded untimed (two clock reads would cost 0.09 us of
    // a 0.5 us call here); one that waits gets its start from the wait and its end from one more read.
    const uint32_t windows = direct_->windows_allocated();
    Chain rows;
    std::pair<ErrorCode, std::string> result;
    const bool ran = queue_->run_inline(
        args.kind, args.count * dtype_size(args.dtype),
        [&](const Algorithm* forced) {
          ChainMemo& m = inline_chain_;
          const uint64_t bytes = args.count * dtype_size(args.dtype);
          if (m.bytes != bytes || m.kind != args.kind || m.windows != windows || m.forced != forced)
            m = {args.kind, bytes, windows, forced, chain(args, forced, windows)};
          rows = m.rows;
          return rows.size > 0;
        },
        [&](uint64_t seq, uint64_t record, const Algorithm* forced) {
          FlightRecorder* const rec = recorder_;
          const bool timed = metrics_ || log_level() >= LogLevel::kInfo;
          const Clock::time_point t0 = timed ? Clock::now() : Clock::time_point{};
          if (rec) rec->started(record, seq, args, t0, false);
          const Call call{args, send, recv, seq, record, static_cast<uint16_t>(seq & 0x7fffu), forced, t0, kNoOthers};
          Clock::time_point start = t0;
          result = guarded_call(failures_, args, seq, [&] {
            // The chain's first row straight away (the latency path's one row, as a rule), the
            // rest of the chain only if it declined.
            const std::optional<Clock::time_point> first = run_native(*rows.rows[0], call);
            if (first) {
              start = *first;
              return;
            }
            Chain rest;
            for (int i = 1; i < rows.size; ++i) rest.add(rows.rows[i]);
            start = run_host(call, rest);
          });
          if (result.first != ErrorCode::kSuccess)
            result.second = record_failure(telemetry_.get(), rec, record, args.kind, result.first, std::move(result.second));
          else if (timed || start != Clock::time_point{})
            observe(args, forced, seq, record, start, Clock::now());
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


void Communicator::execute(const std::shared_ptr<Operation>& w, const std::function<bool()>& others) {
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
      const Call call{a, w->send_, w->recv_, w->seq_, w->record_, w->tag_seq_, w->forced_, t0, others};
      run_host(call, chain(a, w->forced_, w->windows_));
    }
  });
  if (code == ErrorCode::kSuccess) {
    const auto t1 = Clock::now();
    observe(a, w->forced_, w->seq_, w->record_, t0, t1);
    w->finish(ErrorCode::kSuccess, {}, t1);
  } else {
    w->finish(code, record_failure(telemetry_.get(), rec, w->record_, a.kind, code, std::move(why)));
  }
}

void Communicator::observe(const CollectiveArgs& a, const Algorithm* forced, uint64_t seq, uint64_t record,
                           Clock::time_point t0, Clock::time_point t1) {
  const CallEnd end{a, last_algorithm(), forced, seq, record, size(), t0, t1};
  for (CallObserver* o : observers_) o->call_ended(end);
}

Chain Communicator::chain(const CollectiveArgs& a, const Algorithm* forced, uint32_t windows) const {
  if (!direct_) return {};
  CallShape s = shape_;
  s.kind = a.kind;
  s.bytes = a.count * dtype_size(a.dtype);
  s.windows = windows;
  return native_chain(s, forced);
}

std::optional<Clock::time_point> Communicator::run_native(const Algorithm& row, const Call& call) {
  const CollectiveArgs& a = call.args;
  if (failures_.aborted()) fail(ErrorCode::kRemoteError, "{}: aborted (weftCommAbort)", collective_name(a.kind));
  DirectContext ctx;
  ctx.start = call.start;
  ctx.timeout = config_.timeout;
  ctx.abort = &failures_.abort_flag();
  ctx.signature = call_signature(a);
  ctx.transport = transport_.get();
  ctx.others = call.others;
  ctx.fold16 = config_.deterministic;
  // The watchdog's mismatch check starts after a second of waiting (SignatureCheck), so it is
  // made only when the watchdog first runs. One pointer captured: no allocation per call.
  struct Watch {
    FailureWatch& failures;
    const CollectiveArgs& a;
    const DirectContext& ctx;
    uint64_t seq;
    std::optional<FailureWatch::SignatureCheck> check;
  } watch{failures_, a, ctx, call.seq, std::nullopt};
  ctx.watchdog = [w = &watch] {
    if (!w->check) w->check.emplace(w->failures, w->seq, w->ctx.signature, true, w->ctx.start);
    (*w->check)();
  };
  ctx.describe = [w = &watch] { return describe_call(w->a, w->seq); };
  last_algorithm_.store(row.id, std::memory_order_relaxed);
  if (recorder_) {
    recorder_->algorithm(call.record, row.id);
    ctx.wait = recorder_->wait_note(call.record);
    if (call.start == Clock::time_point{}) ctx.record_start = recorder_->start_field(call.record);
  }
  if (!natives_->run(row, a, call.send, call.recv, ctx)) {
    last_algorithm_.store("", std::memory_order_relaxed);
    return std::nullopt;
  }
  return ctx.start;
}

Clock::time_point Communicator::run_host(const Call& call, const Chain& rows) {
  // The fallback chain: each native row that took the call in turn (one declines, having run
  // nothing, when it cannot run it after all: every rank alike), then the schedule.
  for (int i = 0; i < rows.size; ++i)
    if (const std::optional<Clock::time_point> start = run_native(*rows.rows[i], call)) return *start;
  const CollectiveArgs& a = call.args;
  const Clock::time_point t0 = call.start == Clock::time_point{} ? Clock::now() : call.start;
  const std::shared_ptr<const Schedule> sp = algorithms_.schedule_for(a, call.forced);
  const Schedule& s = *sp;
  ExecBuffers bufs{call.send, call.recv, s.scratch_bytes ? scratch_.get(s.scratch_bytes) : nullptr};
  ExecContext ctx;
  ctx.transport = transport_.get();
  ctx.seq = call.tag_seq;
  ctx.signature = call_signature(a);
  ctx.deadline = t0 + config_.timeout;
  ctx.timeout = config_.timeout;
  ctx.abort = &failures_.abort_flag();
  ctx.spin = config_.spin;
  const bool collective = a.kind != CollectiveKind::kSend && a.kind != CollectiveKind::kRecv;
  FailureWatch::SignatureCheck check(failures_, call.seq, ctx.signature, collective, t0);
  ctx.watchdog = [&check] { check(); };
  ctx.describe = [&] { return describe_call(a, call.seq); };
  last_algorithm_.store(s.algorithm, std::memory_order_relaxed);
  if (recorder_) {
    recorder_->algorithm(call.record, s.algorithm);
    ctx.wait = recorder_->wait_note(call.record);
  }
  executor_.run(s, bufs, ctx);
  return t0;
}


// A schedule in flight on the progress thread: its own scratch, context and execution, advanced
// beside the communicator's other operations in flight. It ends its Operation itself.
class Communicator::ScheduledOp final : public InFlight {
 public:
  ScheduledOp(Communicator& c, std::shared_ptr<Operation> w)
      : c_(c),
        w_(std::move(w)),
        t0_(Clock::now()),
        check_(c.failures_, w_->seq_, call_signature(w_->args_),
               w_->args_.kind != CollectiveKind::kSend && w_->args_.kind != CollectiveKind::kRecv, t0_) {
    w_->started_at_ = t0_;
    if (c_.recorder_) c_.recorder_->started(w_->record_, w_->seq_, w_->args_, t0_, w_->queued_);
    guard([&] {
      const CollectiveArgs& a = w_->args_;
      if (c_.failures_.broken())
        fail(ErrorCode::kRemoteError, "{}: the communicator is broken: {}", collective_name(a.kind), c_.failures_.broken_reason());
      if (c_.failures_.aborted()) fail(ErrorCode::kRemoteError, "{}: aborted (weftCommAbort)", collective_name(a.kind));
      schedule_ = c_.algorithms_.schedule_for(a, w_->forced_);
      scratch_ = c_.take_scratch();
      ExecBuffers bufs{w_->send_, w_->recv_, schedule_->scratch_bytes ? scratch_->get(schedule_->scratch_bytes) : nullptr};
      ctx_.transport = c_.transport_.get();
      ctx_.seq = w_->tag_seq_;
      ctx_.signature = call_signature(a);
      ctx_.deadline = t0_ + c_.config_.timeout;
      ctx_.timeout = c_.config_.timeout;
      ctx_.abort = &c_.failures_.abort_flag();
      ctx_.spin = c_.config_.spin;
      ctx_.watchdog = [this] { check_(); };
      ctx_.describe = [this] { return describe_call(w_->args_, w_->seq_); };
      c_.last_algorithm_.store(schedule_->algorithm, std::memory_order_relaxed);
      if (c_.recorder_) {
        c_.recorder_->algorithm(w_->record_, schedule_->algorithm);
        ctx_.wait = c_.recorder_->wait_note(w_->record_);
      }
      exec_.start(*schedule_, bufs, ctx_);
      if (exec_.done()) end();
    });
  }
  ~ScheduledOp() override { c_.give_scratch(std::move(scratch_)); }
  bool advance() override {
    bool moved = false;
    guard([&] {
      moved = exec_.advance();
      if (exec_.done()) end();
    });
    return moved;
  }
  void idle(Clock::time_point now) override {
    guard([&] { exec_.on_idle(now); });
  }
  bool finished() const override { return finished_; }

 private:
  template <class Body>
  void guard(Body&& body) {
    if (finished_) return;
    auto [code, why] = guarded_call(c_.failures_, w_->args_, w_->seq_, body);
    if (code != ErrorCode::kSuccess) {
      finished_ = true;
      w_->finish(code, record_failure(c_.telemetry_.get(), c_.recorder_, w_->record_, w_->args_.kind, code, std::move(why)));
    }
  }
  void end() {
    finished_ = true;
    const auto t1 = Clock::now();
    c_.last_algorithm_.store(schedule_->algorithm, std::memory_order_relaxed);
    c_.observe(w_->args_, w_->forced_, w_->seq_, w_->record_, t0_, t1);
    w_->finish(ErrorCode::kSuccess, {}, t1);
  }

  Communicator& c_;
  std::shared_ptr<Operation> w_;
  Clock::time_point t0_;
  FailureWatch::SignatureCheck check_;
  std::shared_ptr<const Schedule> schedule_;
  std::unique_ptr<ScratchPool> scratch_;
  ExecContext ctx_;
  Execution exec_;
  bool finished_ = false;
};

bool Communicator::begin(const std::shared_ptr<Operation>& w, std::unique_ptr<InFlight>& out) {
  const CollectiveArgs& a = w->args_;
  if (w->device_ >= 0) return false;  // NCCL
  if (chain(a, w->forced_, w->windows_).size > 0) return false;  // native rows run alone (execute)
  auto op = std::make_unique<ScheduledOp>(*this, w);
  if (!op->finished()) out = std::move(op);
  return true;
}

std::unique_ptr<ScratchPool> Communicator::take_scratch() {
  std::lock_guard<std::mutex> lock(scratch_mu_);
  if (spare_scratch_.empty()) return std::make_unique<ScratchPool>();
  auto s = std::move(spare_scratch_.back());
  spare_scratch_.pop_back();
  return s;
}

void Communicator::give_scratch(std::unique_ptr<ScratchPool> s) {
  if (!s) return;
  std::lock_guard<std::mutex> lock(scratch_mu_);
  spare_scratch_.push_back(std::move(s));
}

}  // namespace weft
