#include "runtime/comm/executor.h"

#include <sched.h>

#include <cstring>

#include "collectives/collective.h"
#include "collectives/reduce_kernels.h"
#include "runtime/base/log.h"

namespace weft {

using Clock = std::chrono::steady_clock;

void Executor::grow(size_t steps) {
  if (steps > ops_capacity_) {
    size_t cap = std::max<size_t>(steps, ops_capacity_ * 2);
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

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

void Executor::run(const Schedule& s, const ExecBuffers& bufs, ExecContext& ctx) {
  const size_t n = s.steps.size();
  if (n == 0) return;
  grow(n);
  Transport& tr = *ctx.transport;
  const size_t es = dtype_size(s.dtype);
  std::memcpy(remaining_.data(), s.initial_deps.data(), n * sizeof(uint32_t));
  ready_.clear();
  inflight_.clear();
  for (size_t i = 0; i < n; ++i)
    if (remaining_[i] == 0) ready_.push_back(static_cast<StepId>(i));
  size_t head = 0, completed = 0;
  const bool fuse = tr.reduces_on_delivery() && s.fused.size() == n;

  auto complete = [&](StepId id) {
    ++completed;
    for (uint32_t k = s.dependents_begin[id]; k < s.dependents_begin[id + 1]; ++k) {
      StepId d = s.dependents[k];
      if (--remaining_[d] == 0) ready_.push_back(d);
    }
  };
  auto abort_with = [&](ErrorCode code, const std::string& msg) {
    tr.shutdown(msg);
    throw Error(code, msg);
  };
  auto what = [&] { return ctx.describe ? ctx.describe() : std::string("operation"); };
  // A receive from a rank that called with other arguments: name what differs.
  auto mismatch = [&](int peer, uint64_t sender_tag, size_t got, size_t want) {
    uint16_t theirs = tag_signature(sender_tag);
    std::string diff = theirs != ctx.signature ? signature_difference(ctx.signature, theirs) : std::string("the count");
    abort_with(ErrorCode::kInvalidUsage,
               fmt::format("{}: mismatch with rank {}: the ranks passed different arguments: {} (message of {} bytes, "
                           "expected {})", what(), peer, diff, got, want));
  };

  Clock::time_point idle_since{};
  Clock::time_point next_watchdog{}, next_peer_check{};
  bool idle = false;
  int peer_grace = 0;
  while (completed < n) {
    // 1. Start everything that is ready.
    while (head < ready_.size()) {
      StepId id = ready_[head++];
      const Step& st = s.steps[id];
      switch (st.kind) {
        case StepKind::kSend: {
          TransportOp& op = ops_[id];
          op.error = ErrorCode::kSuccess;
          op.error_message.clear();
          tr.post_send(st.peer, make_tag(ctx.seq, ctx.signature, st.msg), resolve(bufs, st.src), st.bytes, &op);
          inflight_.push_back(id);
          break;
        }
        case StepKind::kRecv: {
          TransportOp& op = ops_[id];
          op.error = ErrorCode::kSuccess;
          op.error_message.clear();
          StepId f = fuse ? s.fused[id] : kNoStep;
          if (f != kNoStep) {
            tr.post_recv_reduce(st.peer, make_tag(ctx.seq, ctx.signature, st.msg), kTagMatchMask,
                                resolve(bufs, s.steps[f].dst), resolve(bufs, s.fused_other[id]), st.bytes, s.dtype,
                                s.op, &op);
          } else {
            tr.post_recv(st.peer, make_tag(ctx.seq, ctx.signature, st.msg), kTagMatchMask, resolve(bufs, st.dst),
                         st.bytes, &op);
          }
          inflight_.push_back(id);
          break;
        }
        case StepKind::kReduce:
          if (fuse && st.dep_count == 1 && s.fused[s.deps[st.dep_begin]] == id) {  // done on delivery
            complete(id);
            break;
          }
          reduce_inplace(s.dtype, s.op, resolve(bufs, st.dst), resolve(bufs, st.src), st.bytes / es);
          complete(id);
          break;
        case StepKind::kReduce3:
          if (fuse && st.dep_count == 1 && s.fused[s.deps[st.dep_begin]] == id) {
            complete(id);
            break;
          }
          reduce_into(s.dtype, s.op, resolve(bufs, st.dst), resolve(bufs, st.src2), resolve(bufs, st.src),
                      st.bytes / es);
          complete(id);
          break;
        case StepKind::kCopy: {
          void* d = resolve(bufs, st.dst);
          const void* src = resolve(bufs, st.src);
          if (d != src && st.bytes) std::memmove(d, src, st.bytes);
          complete(id);
          break;
        }
        case StepKind::kAvg:
          finish_avg(s.dtype, resolve(bufs, st.dst), st.bytes / es, s.nranks);
          complete(id);
          break;
      }
    }
    if (completed == n) break;

    // 2. Drive the transport and collect completions.
    tr.progress();
    bool any = false;
    for (size_t k = 0; k < inflight_.size();) {
      StepId id = inflight_[k];
      TransportOp& op = ops_[id];
      int state = op.state.load(std::memory_order_acquire);
      if (state == TransportOp::kPending) {
        ++k;
        continue;
      }
      const Step& st = s.steps[id];
      if (state == TransportOp::kFailed) {
        bool truncated = st.kind == StepKind::kRecv && op.error == ErrorCode::kInvalidUsage;
        if (truncated || (st.kind == StepKind::kRecv && op.sender_tag && tag_signature(op.sender_tag) != ctx.signature)) {
          mismatch(st.peer, op.sender_tag, op.bytes, st.bytes);
        }
        abort_with(op.error == ErrorCode::kSuccess ? ErrorCode::kRemoteError : op.error,
                   fmt::format("{}: {} {} rank {} failed: {}", what(), st.kind == StepKind::kSend ? "send to" : "receive from",
                               "", st.peer, op.error_message));
      }
      if (st.kind == StepKind::kRecv) {
        if (tag_signature(op.sender_tag) != ctx.signature || op.bytes != st.bytes) {
          mismatch(st.peer, op.sender_tag, op.bytes, st.bytes);
        }
      }
      op.state.store(TransportOp::kIdle, std::memory_order_relaxed);
      inflight_[k] = inflight_.back();
      inflight_.pop_back();
      complete(id);
      any = true;
    }
    if (any || head < ready_.size()) {
      idle = false;
      continue;
    }

    // 3. Nothing moved: spin, then yield, then sleep on the transport's event.
    auto now = Clock::now();
    if (!idle) {
      idle = true;
      idle_since = now;
      continue;
    }
    auto idle_for = now - idle_since;
    if (idle_for < ctx.spin) {
      for (int i = 0; i < 16; ++i) cpu_relax();
      continue;
    }
    if (ctx.wait) {
      // Past the spin: note which rank this operation waits for (its first receive in flight,
      // else its first send) and how far the schedule got, for the flight recorder's dump.
      int peer = inflight_.empty() ? -1 : s.steps[inflight_.front()].peer;
      for (StepId id : inflight_)
        if (s.steps[id].kind == StepKind::kRecv) {
          peer = s.steps[id].peer;
          break;
        }
      ctx.wait->note(peer, static_cast<uint32_t>(completed), static_cast<uint32_t>(n));
    }
    if (ctx.abort && ctx.abort->load(std::memory_order_relaxed)) {
      abort_with(ErrorCode::kRemoteError, fmt::format("{}: aborted (weftCommAbort)", what()));
    }
    if (now >= ctx.deadline) {
      int waiting_on = -1;
      for (StepId id : inflight_) {
        if (s.steps[id].kind == StepKind::kRecv) {
          waiting_on = s.steps[id].peer;
          break;
        }
      }
      abort_with(ErrorCode::kTimeout,
                 fmt::format("{}: timed out (WEFT_TIMEOUT_MS) with {} of {} steps done{}", what(), completed, n,
                             waiting_on >= 0 ? fmt::format(", waiting for rank {}", waiting_on) : std::string()));
    }
    // A failed peer matters only if this operation still waits on it; give completions that
    // arrived just before the failure one more pass. Asked every 5 ms at most: for a shared-memory
    // peer it costs a kill() and a read of /proc/<pid>/stat, which would otherwise compete with
    // the ranks doing the work on a busy machine.
    const bool check_peers = peer_grace > 0 || now >= next_peer_check;
    if (check_peers) next_peer_check = now + std::chrono::milliseconds(5);
    for (size_t k = 0; check_peers && k < inflight_.size(); ++k) {
      const StepId id = inflight_[k];
      if (std::string pf = tr.peer_failure(s.steps[id].peer); !pf.empty()) {
        if (peer_grace++ > 2) {
          // A rank that exits after an error it reported: prefer the cause it published.
          if (ctx.watchdog) {
            try {
              ctx.watchdog();
            } catch (const Error& e) {
              abort_with(e.code(), fmt::format("{}: {}", what(), e.what()));
            }
          }
          abort_with(ErrorCode::kRemoteError, fmt::format("{}: {}", what(), pf));
        }
        break;
      }
    }
    if (ctx.watchdog && now >= next_watchdog) {
      next_watchdog = now + std::chrono::milliseconds(100);
      try {
        ctx.watchdog();
      } catch (const Error& e) {
        abort_with(e.code(), fmt::format("{}: {}", what(), e.what()));
      }
    }
    if (idle_for < ctx.spin * 4) {
      sched_yield();
      continue;
    }
    tr.wait_for_event(std::min(ctx.deadline, now + std::chrono::milliseconds(50)));
  }
}

}  // namespace weft
