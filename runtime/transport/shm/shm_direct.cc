#include "runtime/transport/shm/shm_direct.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <climits>
#include <cstring>
#include <thread>

#include "collectives/convert_kernels.h"
#include "collectives/reduce_kernels.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/store/store.h"
#include "runtime/transport/shm/shm_segment.h"
#include "runtime/base/waiter.h"
#include "runtime/transport/transport.h"

namespace weft {

using Clock = std::chrono::steady_clock;

// Two cache lines per rank, one per call parity: line c%2 says what the rank posted last among
// the calls of that parity (seq is also the futex word), and carries the payload of call c when it
// is at most kInlineBytes, so a peer's flag and data arrive in one cache-line transfer. While a
// peer reads call c's line the poster writes call c+1 into the other line: no false sharing.
struct alignas(64) ShmDirect::Flag {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleepers{0};  // peers in FUTEX_WAIT on seq
  std::atomic<uint32_t> signature{0};
  uint32_t pad = 0;
  std::atomic<uint64_t> bytes{0};
  uint8_t inline_data[40] = {};
};
static_assert(sizeof(std::atomic<uint32_t>) == 4 && std::atomic<uint32_t>::is_always_lock_free, "futex word");

namespace {

constexpr uint64_t kAlign = 64;
constexpr uint64_t kInlineBytes = 40;

// a has reached b (wrapping 32-bit call numbers).
bool reached(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) >= 0; }

// A poster stores its flag and then checks for sleepers; a sleeper counts itself and then checks
// the flag. Without a full fence between each side's store and load, both can miss the other (a
// lost wake-up). The fence on the poster's side (a locked store) waits for the flag's cache line
// to come back from the peer that just read it: ~10% of an 8-byte all-reduce here. So the poster
// uses a plain release store and the sleeper, which is about to sleep anyway, pays for both
// sides with membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED): a full barrier on every CPU running a
// thread of a process that registered for it (an asymmetric Dekker fence, as folly's
// asymmetricHeavyBarrier within a process). Posters whose process could not register (old
// kernels, seccomp) keep the locked store.
struct AsymmetricFence {
  bool light_posts = false;   // this process registered: its posts need no fence
  bool heavy_ok = false;      // the kernel has the global expedited barrier
  AsymmetricFence() {
    const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    heavy_ok = cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0;
    light_posts = heavy_ok && (cmds & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0 &&
                  syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
  }
  void heavy() const {
    if (heavy_ok) syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0);
  }
};

const AsymmetricFence& fence() {
  static const AsymmetricFence f;
  return f;
}

// Polls before the first clock read: a peer on another core usually posts within a few hundred
// ns, and a clock read costs ~27 ns here (kvm-clock).
constexpr int kPollsBeforeClock = 64;
// With more ranks than cores a peer that has not posted is often waiting for this core.
constexpr int kPollsOversubscribed = 8;

}  // namespace

ShmDirect::ShmDirect(Store& store, int rank, int size, const DirectLimits& limits, bool oversubscribed,
                     std::chrono::microseconds spin, Millis timeout)
    : rank_(rank),
      size_(size),
      one_round_bytes_(limits.one_round),
      piece_bytes_(limits.piece),
      allreduce_round_bytes_(limits.allreduce_round),
      slot_bytes_((std::max(limits.one_round, limits.piece) + kAlign - 1) / kAlign * kAlign),
      oversubscribed_(oversubscribed),
      spin_(spin) {
  static_assert(sizeof(Flag) == 64, "one cache line per rank and parity");
  bytes_ = kAlign + 2 * sizeof(Flag) * size_ + 2 * slot_bytes_ * size_;
  // A fresh segment is zero: every flag says "posted 0".
  ShmSegmentSpec spec;
  spec.what = "shm direct path";
  spec.name_prefix = "/weft-d-";
  spec.name_key = "direct_name";
  spec.mapped_key = "direct_mapped";
  spec.creator = rank_ == 0;
  spec.participants = size_;
  spec.bytes = bytes_;
  spec.timeout = timeout;
  base_ = map_shared_segment(store, spec);
  // Where ranks outnumber cores waiters sleep often, and a heavy fence per sleep (~1 us, an IPI
  // to the other CPUs) costs more than the posts save: 4 ranks on 2 cores, 8 bytes, 22-25 us
  // with locked posts against 24-27 us with light ones. Every rank of the node decides alike.
  light_posts_ = !oversubscribed_ && fence().light_posts;
  heavy_sleeps_ = !oversubscribed_ && fence().heavy_ok;
  WEFT_LOG_DEBUG("shm direct path: {} ranks, slots of {} bytes, one round up to {} bytes{}{}", size_, slot_bytes_,
                 one_round_bytes_,
                 piece_bytes_ ? fmt::format(", all-reduces over {} bytes in pieces of {} bytes", allreduce_round_bytes_, piece_bytes_) : "",
                 oversubscribed_ ? ", ranks outnumber cores: waiters yield" : "");
}

ShmDirect::~ShmDirect() {
  if (base_) munmap(base_, bytes_);
  for (auto& w : windows_) munmap(w.base, w.mapped);
}

void* ShmDirect::alloc_window(Store& store, uint64_t bytes, Millis timeout) {
  if (bytes == 0) fail(ErrorCode::kInvalidUsage, "weftMemAlloc: 0 bytes asked for");
  // Numbered by the calls (collective: the same number on every rank), failed ones included, so
  // a retry after a failure never reads the failed call's keys.
  const uint32_t id = window_calls_++;
  const std::string key = fmt::format("direct_win{}_", id);
  // Every rank's region has the same size: each says what it asked for, and every rank checks all,
  // so a rank that asked for another size fails everywhere alike.
  store.set(key + "bytes" + std::to_string(rank_), to_bytes(std::to_string(bytes)));
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const std::string theirs = to_string(store.get(key + "bytes" + std::to_string(r), timeout));
    if (theirs != std::to_string(bytes))
      fail(ErrorCode::kInvalidUsage, "weftMemAlloc: rank {} asked for {} bytes, this rank ({}) for {}: every rank of the "
           "communicator must ask for the same size (window {})", r, theirs, rank_, bytes, id);
  }
  Window w;
  w.id = id;
  w.bytes = bytes;
  w.stride = (bytes + 4095) / 4096 * 4096;
  w.mapped = static_cast<size_t>(w.stride) * size_;
  ShmSegmentSpec spec;
  spec.what = "weftMemAlloc";
  spec.name_prefix = "/weft-w-";
  spec.name_key = key + "name";
  spec.mapped_key = key + "mapped";
  spec.creator = rank_ == 0;
  spec.participants = size_;
  spec.bytes = w.mapped;
  spec.reserve = true;  // no SIGBUS later on a full /dev/shm: a clear error now
  spec.timeout = timeout;
  w.base = static_cast<uint8_t*>(map_shared_segment(store, spec));
  {
    std::lock_guard<std::mutex> lock(windows_mu_);
    windows_.push_back(w);
  }
  windows_allocated_.fetch_add(1, std::memory_order_release);
  WEFT_LOG_DEBUG("weftMemAlloc: window {} of {} bytes per rank ({} ranks of this node map it)", id, bytes, size_);
  return w.base + static_cast<size_t>(rank_) * w.stride;
}

std::vector<ShmDirect::Mapping> ShmDirect::take_windows() {
  std::lock_guard<std::mutex> lock(windows_mu_);
  std::vector<Mapping> out;
  for (auto& w : windows_) out.push_back({w.base, w.mapped, w.base + static_cast<size_t>(rank_) * w.stride});
  windows_.clear();
  return out;
}

bool ShmDirect::free_window(void* p) {
  std::lock_guard<std::mutex> lock(windows_mu_);
  for (auto it = windows_.begin(); it != windows_.end(); ++it) {
    if (p == it->base + static_cast<size_t>(rank_) * it->stride) {
      munmap(it->base, it->mapped);
      windows_.erase(it);
      return true;
    }
  }
  return false;
}

const ShmDirect::Window* ShmDirect::find_window(const void* p, uint64_t bytes, uint64_t& off) const {
  const auto* q = static_cast<const uint8_t*>(p);
  for (const auto& w : windows_) {
    const uint8_t* mine = w.base + static_cast<size_t>(rank_) * w.stride;
    if (q >= mine && q <= mine + w.bytes && bytes <= static_cast<uint64_t>(mine + w.bytes - q)) {
      off = static_cast<uint64_t>(q - mine);
      return &w;
    }
  }
  return nullptr;
}

ShmDirect::Flag* ShmDirect::flag(int r, uint32_t c) const {
  return reinterpret_cast<Flag*>(static_cast<uint8_t*>(base_) + kAlign) + 2 * r + (c & 1);
}

uint8_t* ShmDirect::slot(int r, uint32_t c, uint64_t bytes) const {
  if (bytes <= kInlineBytes) return flag(r, c)->inline_data;
  return static_cast<uint8_t*>(base_) + kAlign + 2 * sizeof(Flag) * size_ + (static_cast<size_t>(r) * 2 + (c & 1)) * slot_bytes_;
}

void ShmDirect::post(uint32_t c, uint64_t bytes, const DirectContext& ctx) {
  Flag* f = flag(rank_, c);
  f->signature.store(ctx.signature, std::memory_order_relaxed);
  f->bytes.store(bytes, std::memory_order_relaxed);
  if (light_posts_) {
    // Releases the slot's bytes and the fields above; a sleeper's heavy fence orders it before
    // the sleepers load below (AsymmetricFence).
    f->seq.store(c, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (f->sleepers.load(std::memory_order_relaxed) != 0) shm_futex(&f->seq, FUTEX_WAKE, INT_MAX, nullptr);
    return;
  }
  f->seq.store(c, std::memory_order_seq_cst);
  if (f->sleepers.load(std::memory_order_seq_cst) != 0) shm_futex(&f->seq, FUTEX_WAKE, INT_MAX, nullptr);
}

// Past the spin: the flight recorder shows whom this call waits for, and the checks that end a
// wait run (abort and deadline every kPeerCheckEvery, with a dead peer; the watchdog every
// kWatchdogEvery).
void ShmDirect::wait_checks(int r, const DirectContext& ctx, WaitPace& pace, Clock::time_point now) const {
  if (ctx.wait && !pace.noted) {
    ctx.wait->note(r, 0, 0);
    pace.noted = true;
  }
  if (!pace.checks.due(now)) return;
  if (ctx.abort && ctx.abort->load()) fail(ErrorCode::kRemoteError, "{}: aborted (weftCommAbort)", ctx.describe());
  if (now > ctx.start + ctx.timeout)
    fail(ErrorCode::kTimeout, "{}: timed out waiting for rank {} (it has not made this call within the timeout of {} ms: "
         "WEFT_TIMEOUT_MS or the group's)", ctx.describe(), r, ctx.timeout.count());
  if (ctx.transport)
    if (std::string why = ctx.transport->peer_failure(r); !why.empty())
      fail(ErrorCode::kRemoteError, "{}: rank {} failed: {}", ctx.describe(), r, why);
  if (ctx.watchdog && pace.watchdog.due(now)) ctx.watchdog();
}

// Sleeps on rank r's flag until it moves (the poster wakes us) or the timeout passes: 5 ms, or
// 100 us with operations in flight beside this call (they are driven between sleeps).
void ShmDirect::sleep_on(Flag* f, uint32_t c, const DirectContext& ctx) const {
  f->sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (heavy_sleeps_) fence().heavy();
  const uint32_t seen = f->seq.load(std::memory_order_seq_cst);
  if (!reached(seen, c)) {
    timespec ts{0, ctx.others ? 100'000 : 5'000'000};
    shm_futex(&f->seq, FUTEX_WAIT, seen, &ts);
  }
  f->sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

// Rank r has not posted call c after the first polls: wait with the Waiter. Spin while the peer
// is likely to answer soon; with more ranks than cores it cannot answer while this rank holds the
// core, so yield at once (after kPollsOversubscribed polls, no timed spin: 4 ranks on 2 cores, 8
// bytes, 6.3-9.2 us per call with 64 polls and a 2 us spin, 2.2-3.6 us without; the spin was most
// of it). Then sleep on the peer's flag (it wakes us when it posts).
void ShmDirect::wait_slow(Flag* f, int r, uint32_t c, const DirectContext& ctx) {
  const auto t0 = Clock::now();
  if (ctx.start == Clock::time_point{}) {
    ctx.start = t0;
    if (ctx.record_start) ctx.record_start->store(t0.time_since_epoch().count(), std::memory_order_relaxed);
  }
  Waiter waiter = oversubscribed_ ? Waiter(std::chrono::microseconds(0), std::chrono::microseconds(2000)) : Waiter(spin_);
  waiter.phase(t0);
  WaitPace pace{Every(kPeerCheckEvery, t0 + kPeerCheckEvery), Every(kWatchdogEvery, t0 + kWatchdogEvery), false};
  for (uint32_t i = 0;; ++i) {
    if (reached(f->seq.load(std::memory_order_acquire), c)) return;
    if ((i & 63) != 0) {  // a clock read costs ~27 ns here: poll between them
      cpu_relax();
      continue;
    }
    const auto now = Clock::now();
    if (ctx.others) ctx.others();  // drive the operations in flight beside this call
    const Waiter::Phase phase = waiter.phase(now);
    if (phase == Waiter::Phase::kSpin) continue;
    wait_checks(r, ctx, pace, now);
    if (phase == Waiter::Phase::kYield) sched_yield();
    else sleep_on(f, c, ctx);
  }
}

void ShmDirect::wait_for(int r, uint32_t c, const DirectContext& ctx, bool check, uint64_t expect_bytes) {
  Flag* f = flag(r, c);
  uint32_t seen = f->seq.load(std::memory_order_acquire);
  for (int i = 0, polls = oversubscribed_ ? kPollsOversubscribed : kPollsBeforeClock; i < polls && !reached(seen, c); ++i) {
    cpu_relax();
    seen = f->seq.load(std::memory_order_acquire);
  }
  if (!reached(seen, c)) wait_slow(f, r, c, ctx);
  if (check) {
    const auto theirs = static_cast<uint16_t>(f->signature.load(std::memory_order_relaxed));
    if (theirs != ctx.signature)
      fail(ErrorCode::kInvalidUsage, "{}: mismatch with rank {}: the ranks passed different arguments: {}", ctx.describe(), r,
           signature_difference(ctx.signature, theirs));
    const uint64_t their_bytes = f->bytes.load(std::memory_order_relaxed);
    if (expect_bytes != kAnyBytes && their_bytes != expect_bytes)
      fail(ErrorCode::kInvalidUsage, "{}: mismatch with rank {}: the ranks passed different arguments: the count ({} bytes here, {} there)",
           ctx.describe(), r, expect_bytes, their_bytes);
  }
}

namespace {
// float16 / bfloat16 sums: in float32 in rank order, rounded once (as the f32acc schedule). Its own
// function, out of line: its 8 KiB accumulator (stack probes) and loops cost the float32 latency
// path 46 instructions a call while reduce_ranks held them.
template <typename Src>
[[gnu::noinline]] void reduce_ranks_f32(DataType type, RedOp op, void* out, int n, const Src& src, uint64_t count) {
  constexpr uint64_t kBlock = 2048;
  float acc[kBlock];
  for (uint64_t first = 0; first < count; first += kBlock) {
    const uint64_t m = std::min(kBlock, count - first);
    auto at = [&](int r) { return static_cast<const uint8_t*>(src(r)) + first * 2; };
    widen_to_f32(type, acc, at(0), m);
    for (int r = 1; r < n; ++r) widen_add_f32(type, acc, at(r), m);
    narrow_from_f32(type, static_cast<uint8_t*>(out) + first * 2, acc, m, op == RedOp::kAvg ? n : 1);
  }
}

// out = src(0) OP src(1) OP ... OP src(n - 1), in rank order (every rank gets the same bits); for
// kAvg divided by n, the division fused into the last addition where the type allows it
// (sum_avg_into: the same bits as a pass of its own). out may be src(0) or src(1) exactly.
template <typename Src>
void reduce_ranks(DataType type, RedOp op, void* out, int n, const Src& src, uint64_t count, bool fold16) {
  if (!fold16 && sums_in_f32(type, op)) return reduce_ranks_f32(type, op, out, n, src, count);
  if (op == RedOp::kAvg) {
    if (n == 2) return sum_avg_into(type, out, src(0), src(1), count, 2);
    reduce_into(type, op, out, src(0), src(1), count);
    for (int r = 2; r + 1 < n; ++r) reduce_inplace(type, op, out, src(r), count);
    return sum_avg_into(type, out, out, src(n - 1), count, n);
  }
  reduce_into(type, op, out, src(0), src(1), count);
  for (int r = 2; r < n; ++r) reduce_inplace(type, op, out, src(r), count);
}
}  // namespace

void ShmDirect::all_reduce_pieces(const CollectiveArgs& a, const void* send, void* recv, const DirectContext& ctx) {
  ++calls_;
  const uint64_t es = dtype_size(a.dtype);
  const uint64_t piece_el = std::max<uint64_t>(1, piece_bytes_ / es);
  const auto* in = static_cast<const uint8_t*>(send);
  auto* out = static_cast<uint8_t*>(recv);
  for (uint64_t first = 0; first < a.count; first += piece_el) {
    const uint64_t count = std::min(piece_el, a.count - first), bytes = count * es;
    // Round 1 (call c): publish the piece; slot c%2 was last read in call c-2, which every peer
    // is past once it has posted c-1.
    const uint32_t c = next_++;
    for (int r = 0; r < size_; ++r)
      if (r != rank_) wait_for(r, c - 1, ctx, false);
    std::memcpy(slot(rank_, c, bytes), in + first * es, bytes);  // before out is written: in may be out
    post(c, bytes, ctx);
    for (int r = 0; r < size_; ++r)
      if (r != rank_) wait_for(r, c, ctx, true, bytes);
    // This rank's share, reduced from every slot in rank order (the same bits as one round).
    const uint64_t lo = part_offset(count, size_, rank_), n_el = part_offset(count, size_, rank_ + 1) - lo;
    uint8_t* mine = out + (first + lo) * es;
    if (n_el) {
      reduce_ranks(a.dtype, a.op, mine, size_, [&](int r) { return slot(r, c, bytes) + lo * es; }, n_el, ctx.fold16);
    }
    // Round 2 (call c+1): publish the share in slot (c+1)%2, last read in call c-1, which every
    // peer is past (it posted c); then copy every peer's share out of its slot.
    const uint32_t c2 = next_++;
    if (n_el) std::memcpy(slot(rank_, c2, bytes) + lo * es, mine, n_el * es);
    post(c2, bytes, ctx);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      wait_for(r, c2, ctx, true, bytes);
      const uint64_t rlo = part_offset(count, size_, r), rn = part_offset(count, size_, r + 1) - rlo;
      if (rn) std::memcpy(out + (first + rlo) * es, slot(r, c2, bytes) + rlo * es, rn * es);
    }
  }
}

namespace {
// Where a rank's buffers of a window all-reduce are (in its flag's line, round 1).
struct WindowDesc {
  uint32_t send_id, recv_id;  // kNoWindow: not a window
  uint64_t send_off, recv_off;
};
static_assert(sizeof(WindowDesc) <= kInlineBytes, "fits the flag's line");
constexpr uint32_t kNoWindow = ~uint32_t{0};
constexpr uint64_t kWindowFailed = ~uint64_t{0} - 1;  // round 2's size when a rank could not go on
constexpr uint64_t kWindowBlockBytes = 32 << 10;      // reduced in L1, then written to every rank

// Copies n bytes with non-temporal stores where dst is 16-byte aligned (the unaligned head and the
// tail by memcpy). For an out-of-place all-reduce on windows: the receive buffers' lines are not
// in cache, and plain stores would first read each of them from memory (read for ownership). In
// place the lines were just read and are in cache, and plain stores are faster (9.2-10.0 against
// 11.4-12.2 ms per 100 MB with streaming stores). The caller fences before it posts.
void copy_streaming(uint8_t* dst, const uint8_t* src, size_t n) {
#if defined(__SSE2__)
  const size_t head = std::min(n, static_cast<size_t>((16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15));
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  const size_t body = n & ~size_t{63};
  for (size_t i = 0; i < body; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  std::memcpy(dst + body, src + body, n - body);
#else
  std::memcpy(dst, src, n);
#endif
}
}  // namespace

bool ShmDirect::all_reduce_window(const CollectiveArgs& a, const void* send, void* recv, const DirectContext& ctx) {
  const uint64_t es = dtype_size(a.dtype), bytes = a.count * es;
  WindowDesc mine{kNoWindow, kNoWindow, 0, 0};
  {
    std::lock_guard<std::mutex> lock(windows_mu_);
    if (const Window* w = find_window(send, bytes, mine.send_off)) mine.send_id = w->id;
    if (const Window* w = find_window(recv, bytes, mine.recv_off)) mine.recv_id = w->id;
  }
  // Round 1 (call c): say where this rank's buffers are. Line c%2 was last read in call c-2,
  // which every peer is past once it has posted c-1.
  const uint32_t c = next_++;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) wait_for(r, c - 1, ctx, false);
  std::memcpy(flag(rank_, c)->inline_data, &mine, sizeof mine);
  post(c, bytes, ctx);
  std::vector<WindowDesc> all(static_cast<size_t>(size_));
  bool windows = true;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) wait_for(r, c, ctx, true, bytes);
    std::memcpy(&all[static_cast<size_t>(r)], flag(r, c)->inline_data, sizeof(WindowDesc));
    windows = windows && all[static_cast<size_t>(r)].send_id != kNoWindow && all[static_cast<size_t>(r)].recv_id != kNoWindow;
  }
  ++calls_;
  if (!windows) return false;  // every rank saw the same descriptors: every rank returns false
  // Every rank's buffers in this rank's view of the windows.
  std::vector<const uint8_t*> src(static_cast<size_t>(size_));
  std::vector<uint8_t*> dst(static_cast<size_t>(size_));
  std::string missing;
  {
    std::lock_guard<std::mutex> lock(windows_mu_);
    auto where = [&](uint32_t id, uint64_t off, int r) -> uint8_t* {
      for (const auto& w : windows_)
        if (w.id == id && off <= w.bytes && bytes <= w.bytes - off) return w.base + static_cast<size_t>(r) * w.stride + off;
      if (missing.empty()) missing = fmt::format("window {} (rank {}'s buffer) is not mapped here (freed on this rank?)", id, r);
      return nullptr;
    };
    for (int r = 0; r < size_; ++r) {
      src[static_cast<size_t>(r)] = where(all[static_cast<size_t>(r)].send_id, all[static_cast<size_t>(r)].send_off, r);
      dst[static_cast<size_t>(r)] = where(all[static_cast<size_t>(r)].recv_id, all[static_cast<size_t>(r)].recv_off, r);
    }
  }
  const uint32_t c2 = next_++;
  if (!missing.empty()) {
    post(c2, kWindowFailed, ctx);  // the peers fail too instead of waiting for this rank
    fail(ErrorCode::kInvalidUsage, "{}: {}", ctx.describe(), missing);
  }
  // This rank's share, block by block: reduced from every rank's buffer in rank order, then
  // written to every rank's buffer. In place on rank 0 or 1 the block is reduced straight into
  // that rank's buffer (reduce_ranks reads each element of it before writing it) and copied from
  // there while it is in L1; otherwise it is reduced into a block of its own that stays in L1.
  // (100 MB averaged over 2 ranks in place: one pass less per element.)
  const uint64_t lo = part_offset(a.count, size_, rank_), hi = part_offset(a.count, size_, rank_ + 1);
  const uint64_t block_el = std::max<uint64_t>(1, kWindowBlockBytes / es);
  if (block_.size() * sizeof(uint64_t) < kWindowBlockBytes) block_.assign(kWindowBlockBytes / sizeof(uint64_t), 0);
  auto* tmp = reinterpret_cast<uint8_t*>(block_.data());
  const int home = dst[0] == src[0] ? 0 : dst[1] == src[1] ? 1 : -1;
  for (uint64_t first = lo; first < hi; first += block_el) {
    const uint64_t n = std::min(block_el, hi - first), at = first * es;
    uint8_t* out = home >= 0 ? dst[static_cast<size_t>(home)] + at : tmp;
    reduce_ranks(a.dtype, a.op, out, size_, [&](int r) { return src[static_cast<size_t>(r)] + at; }, n, ctx.fold16);
    for (int r = 0; r < size_; ++r) {
      const size_t q = static_cast<size_t>(r);
      if (r == home) continue;
      if (dst[q] == src[q]) std::memcpy(dst[q] + at, out, n * es);
      else copy_streaming(dst[q] + at, out, n * es);
    }
  }
#if defined(__SSE2__)
  _mm_sfence();  // the streaming stores are weakly ordered: before the post that publishes them
#endif
  // Round 2 (call c+1): this rank's share is in every buffer; once every peer says the same, this
  // rank's receive buffer is whole and nobody reads its send buffer any more.
  post(c2, bytes, ctx);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    wait_for(r, c2, ctx, true, kAnyBytes);
    if (flag(r, c2)->bytes.load(std::memory_order_relaxed) == kWindowFailed)
      fail(ErrorCode::kRemoteError, "{}: rank {} could not reach every rank's buffer (a window freed there?)", ctx.describe(), r);
  }
  return true;
}

void ShmDirect::run(const CollectiveArgs& a, const void* send, void* recv, const DirectContext& ctx) {
  const uint64_t es = dtype_size(a.dtype), bytes = a.count * es;
  const uint32_t c = next_++;
  ++calls_;
  // Slot c%2 was last read in call c-2: every peer is past it once it has posted c-1.
  for (int r = 0; r < size_; ++r)
    if (r != rank_) wait_for(r, c - 1, ctx, false);
  const uint64_t posted = a.kind == CollectiveKind::kBroadcast && a.root != rank_ ? 0 : bytes;
  const bool contributes = a.kind == CollectiveKind::kAllReduce || a.kind == CollectiveKind::kReduce ||
                           a.kind == CollectiveKind::kAllGather || (a.kind == CollectiveKind::kBroadcast && a.root == rank_);
  if (contributes && bytes) std::memcpy(slot(rank_, c, bytes), send, bytes);
  post(c, posted, ctx);
  switch (a.kind) {
    case CollectiveKind::kBarrier:
      for (int r = 0; r < size_; ++r)
        if (r != rank_) wait_for(r, c, ctx, true);
      return;
    case CollectiveKind::kBroadcast:
      if (a.root == rank_) {
        if (!a.in_place && bytes) std::memcpy(recv, send, bytes);
        return;
      }
      wait_for(a.root, c, ctx, true, bytes);
      if (bytes) std::memcpy(recv, slot(a.root, c, bytes), bytes);
      return;
    case CollectiveKind::kAllGather:
      for (int r = 0; r < size_; ++r) {
        if (r != rank_) wait_for(r, c, ctx, true, bytes);
        if (bytes && !(r == rank_ && a.in_place)) std::memcpy(static_cast<uint8_t*>(recv) + r * bytes, slot(r, c, bytes), bytes);
      }
      return;
    case CollectiveKind::kReduce:
    case CollectiveKind::kAllReduce: {
      if (a.kind == CollectiveKind::kReduce && a.root != rank_) return;
      for (int r = 0; r < size_; ++r)
        if (r != rank_) wait_for(r, c, ctx, true, bytes);
      if (!bytes) return;
      // Every rank combines the slots in rank order: the same bits everywhere.
      reduce_ranks(a.dtype, a.op, recv, size_, [&](int r) { return slot(r, c, bytes); }, a.count, ctx.fold16);
      return;
    }
    default: fail(ErrorCode::kInternalError, "shm direct path: {} is not handled", collective_name(a.kind));
  }
}

}  // namespace weft
