#include "runtime/comm/executor.h"

#include <cstring>

#include "collectives/collective.h"
#include "collectives/convert_kernels.h"
#include "collectives/reduce_kernels.h"
#include "runtime/base/log.h"
#include "runtime/base/waiter.h"

namespace weft {

using Clock = std::chrono::steady_clock;

void Execution::grow(size_t steps) {
  if (steps > ops_capacity_) {
    size_t cap = std::max(steps, ops_capacity_ * 2);
    ops_ = std::make_unique<TransportOp[]>(cap);
    ops_capacity_ = cap;
  }
  remaining_.resize(std::max(remaining_.size(), steps));
  ready_.reserve(steps);
  inflight_.reserve(steps);
}

namespace {

inline void* resolve(const ExecBuffers& b, const Ref& r) {
  switch (r.buf) {
    case Buf::kSend: return const_cast<uint8_t*>(static_cast<const uint8_t*>(b.send)) + r.offset;
    case Buf::kRecv: return static_cast<uint8_t*>(b.recv) + r.offset;
    case Buf::kScratch: return static_cast<uint8_t*>(b.scratch) + r.offset;
  }
  return nullptr;
}

}  // namespace

void Execution::start(const Schedule& s, const ExecBuffers& bufs, ExecContext& ctx) {
  s_ = &s;
  bufs_ = bufs;
  ctx_ = &ctx;
  n_ = s.steps.size();
  head_ = completed_ = 0;
  peer_grace_ = 0;
  watchdog_due_.now();
  peer_check_due_.now();
  ready_.clear();
  inflight_.clear();
  if (n_ == 0) return;
  grow(n_);
  std::memcpy(remaining_.data(), s.initial_deps.data(), n_ * sizeof(uint32_t));
  for (size_t i = 0; i < n_; ++i)
    if (remaining_[i] == 0) ready_.push_back(static_cast<StepId>(i));
  fuse_ = ctx.transport->reduces_on_delivery() && s.fused.size() == n_;
}

std::string Execution::what() const { return ctx_->describe ? ctx_->describe() : std::string("operation"); }

void Execution::complete(StepId id) {
  ++completed_;
  const Schedule& s = *s_;
  for (uint32_t k = s.dependents_begin[id]; k < s.dependents_begin[id + 1]; ++k) {
    StepId d = s.dependents[k];
    if (--remaining_[d] == 0) ready_.push_back(d);
  }
}

void Execution::abort_with(ErrorCode code, const std::string& msg) {
  ctx_->transport->shutdown(msg);
  throw Error(code, msg);
}

// A receive from a rank that called with other arguments: name what differs.
void Execution::mismatch(int peer, uint64_t sender_tag, size_t got, size_t want) {
  uint16_t theirs = tag_signature(sender_tag);
  std::string diff = theirs != ctx_->signature ? signature_difference(ctx_->signature, theirs) : std::string("the count");
  if (theirs == ctx_->signature && (theirs >> 12) == static_cast<uint16_t>(CollectiveKind::kAllToAllv)) {
    // Unequal splits: the two ranks' counts for this pair, named on both sides.
    const int me = ctx_->transport->rank();
    const size_t es = dtype_size(s_->dtype);
    abort_with(ErrorCode::kInvalidUsage,
               fmt::format("{}: mismatch with rank {}: the ranks passed different arguments: the count: rank {} sent {} "
                           "elements ({} bytes) to rank {}, which expects {} ({} bytes): rank {}'s sendcounts[{}] and "
                           "rank {}'s recvcounts[{}] differ",
                           what(), peer, peer, got / es, got, me, want / es, want, peer, me, me, peer));
  }
  abort_with(ErrorCode::kInvalidUsage,
             fmt::format("{}: mismatch with rank {}: the ranks passed different arguments: {} (message of {} bytes, "
                         "expected {})", what(), peer, diff, got, want));
}

void Execution::post(StepId id) {
  const Schedule& s = *s_;
  const Step& st = s.steps[id];
  Transport& tr = *ctx_->transport;
  const size_t es = dtype_size(s.dtype);
  const bool fused_reduce = fuse_ && st.dep_count == 1 && s.fused[s.deps[st.dep_begin]] == id;  // done on delivery
  switch (st.kind) {
    case StepKind::kSend: {
      TransportOp& op = ops_[id];
      op.error = ErrorCode::kSuccess;
      op.error_message.clear();
      tr.post_send(st.peer, make_tag(ctx_->seq, ctx_->signature, st.msg), resolve(bufs_, st.src), st.bytes, &op);
      inflight_.push_back(id);
      return;
    }
    case StepKind::kRecv: {
      TransportOp& op = ops_[id];
      op.error = ErrorCode::kSuccess;
      op.error_message.clear();
      StepId f = fuse_ ? s.fused[id] : kNoStep;
      if (f != kNoStep) {
        tr.post_recv_reduce(st.peer, make_tag(ctx_->seq, ctx_->signature, st.msg), kTagMatchMask,
                            resolve(bufs_, s.steps[f].dst), resolve(bufs_, s.fused_other[id]), st.bytes, s.dtype, s.op,
                            &op);
      } else {
        tr.post_recv(st.peer, make_tag(ctx_->seq, ctx_->signature, st.msg), kTagMatchMask, resolve(bufs_, st.dst),
                     st.bytes, &op);
      }
      inflight_.push_back(id);
      return;
    }
    case StepKind::kReduce:
      if (!fused_reduce) reduce_inplace(s.dtype, s.op, resolve(bufs_, st.dst), resolve(bufs_, st.src), st.bytes / es);
      break;
    case StepKind::kReduce3:
      if (!fused_reduce)
        reduce_into(s.dtype, s.op, resolve(bufs_, st.dst), resolve(bufs_, st.src2), resolve(bufs_, st.src), st.bytes / es);
      break;
    case StepKind::kCopy: {
      void* d = resolve(bufs_, st.dst);
      const void* src = resolve(bufs_, st.src);
      if (d != src && st.bytes) std::memmove(d, src, st.bytes);
      break;
    }
    case StepKind::kAvg:
      finish_avg(s.dtype, resolve(bufs_, st.dst), st.bytes / es, s.nranks);
      break;
    case StepKind::kWiden:
      widen_to_f32(s.wire, static_cast<float*>(resolve(bufs_, st.dst)), resolve(bufs_, st.src), st.bytes / 2);
      break;
    case StepKind::kWidenAdd:
      widen_add_f32(s.wire, static_cast<float*>(resolve(bufs_, st.dst)), resolve(bufs_, st.src), st.bytes / 2);
      break;
    case StepKind::kNarrow:
      narrow_from_f32(s.wire, resolve(bufs_, st.dst), static_cast<const float*>(resolve(bufs_, st.src)), st.bytes / 2,
                      st.divide ? s.nranks : 1);
      break;
  }
  complete(id);
}

bool Execution::advance() {
  bool moved = false;
  for (;;) {
    // 1. Start everything that is ready.
    while (head_ < ready_.size()) {
      post(ready_[head_++]);
      moved = true;
    }
    if (done()) return moved;
    // 2. Collect completions (the caller drove the transport).
    bool any = false;
    for (size_t k = 0; k < inflight_.size();) {
      StepId id = inflight_[k];
      TransportOp& op = ops_[id];
      int state = op.state.load(std::memory_order_acquire);
      if (state == TransportOp::kPending) {
        ++k;
        continue;
      }
      const Step& st = s_->steps[id];
      const bool recv = st.kind == StepKind::kRecv;
      if (state == TransportOp::kFailed) {
        bool truncated = recv && op.error == ErrorCode::kInvalidUsage;
        if (truncated || (recv && op.sender_tag && tag_signature(op.sender_tag) != ctx_->signature))
          mismatch(st.peer, op.sender_tag, op.bytes, st.bytes);
        abort_with(op.error == ErrorCode::kSuccess ? ErrorCode::kRemoteError : op.error,
                   fmt::format("{}: {} rank {} failed: {}", what(), recv ? "receive from" : "send to", st.peer,
                               op.error_message));
      }
      if (recv && (tag_signature(op.sender_tag) != ctx_->signature || op.bytes != st.bytes))
        mismatch(st.peer, op.sender_tag, op.bytes, st.bytes);
      op.state.store(TransportOp::kIdle, std::memory_order_relaxed);
      inflight_[k] = inflight_.back();
      inflight_.pop_back();
      complete(id);
      any = true;
    }
    if (!any) return moved;
    moved = true;
  }
}

int Execution::waited_peer() const {
  int peer = inflight_.empty() ? -1 : s_->steps[inflight_.front()].peer;
  for (StepId id : inflight_)
    if (s_->steps[id].kind == StepKind::kRecv) return s_->steps[id].peer;
  return peer;
}

void Execution::on_idle(Clock::time_point now) {
  ExecContext& ctx = *ctx_;
  // Note which rank this operation waits for and how far the schedule got (flight recorder).
  if (ctx.wait) ctx.wait->note(waited_peer(), static_cast<uint32_t>(completed_), static_cast<uint32_t>(n_));
  if (ctx.abort && ctx.abort->load(std::memory_order_relaxed))
    abort_with(ErrorCode::kRemoteError, fmt::format("{}: aborted (weftCommAbort)", what()));
  if (now >= ctx.deadline) {
    int waiting_on = -1;
    for (StepId id : inflight_)
      if (s_->steps[id].kind == StepKind::kRecv) {
        waiting_on = s_->steps[id].peer;
        break;
      }
    abort_with(ErrorCode::kTimeout,
               fmt::format("{}: timed out (no progress within the timeout of {} ms: WEFT_TIMEOUT_MS or the group's) with {} "
                           "of {} steps done{}", what(), ctx.timeout.count(), completed_, n_,
                           waiting_on >= 0 ? fmt::format(", waiting for rank {}", waiting_on) : std::string()));
  }
  auto watchdog = [&] {
    try {
      ctx.watchdog();
    } catch (const Error& e) {
      abort_with(e.code(), fmt::format("{}: {}", what(), e.what()));
    }
  };
  // A failed peer matters only if this operation still waits on it; give completions that
  // arrived just before the failure one more pass. Asked every kPeerCheckEvery at most.
  const bool check_peers = peer_check_due_.due(now) || peer_grace_ > 0;
  for (size_t k = 0; check_peers && k < inflight_.size(); ++k) {
    if (std::string pf = ctx.transport->peer_failure(s_->steps[inflight_[k]].peer); !pf.empty()) {
      if (peer_grace_++ > 2) {
        if (ctx.watchdog) watchdog();  // a rank that exits after an error it reported: prefer its cause
        abort_with(ErrorCode::kRemoteError, fmt::format("{}: {}", what(), pf));
      }
      break;
    }
  }
  if (ctx.watchdog && watchdog_due_.due(now)) watchdog();
}

void Executor::run(const Schedule& s, const ExecBuffers& bufs, ExecContext& ctx) {
  Execution& e = exec_;
  e.start(s, bufs, ctx);
  Transport& tr = *ctx.transport;
  Waiter waiter(ctx.spin);
  for (;;) {
    bool moved = e.advance();
    if (e.done()) return;
    moved |= tr.progress();
    if (moved) {
      waiter.moved();
      continue;
    }
    const auto now = Clock::now();
    const Waiter::Phase phase = waiter.idle(now);
    if (phase == Waiter::Phase::kSpin) continue;
    e.on_idle(now);
    if (phase == Waiter::Phase::kSleep) tr.wait_for_event(std::min(ctx.deadline, now + std::chrono::milliseconds(50)));
  }
}

}  // namespace weft
