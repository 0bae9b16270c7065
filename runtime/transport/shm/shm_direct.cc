#include "runtime/transport/shm/shm_direct.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <thread>

#include "collectives/reduce_kernels.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/secret.h"
#include "runtime/store/store.h"
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

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

// a has reached b (wrapping 32-bit call numbers).
bool reached(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) >= 0; }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ShmDirect::ShmDirect(Store& store, int rank, int size, uint64_t slot_bytes, uint64_t piece_bytes, bool oversubscribed,
                     std::chrono::microseconds spin, Millis timeout)
    : rank_(rank),
      size_(size),
      one_round_bytes_(slot_bytes),
      piece_bytes_(piece_bytes),
      slot_bytes_((std::max(slot_bytes, piece_bytes) + kAlign - 1) / kAlign * kAlign),
      oversubscribed_(oversubscribed),
      spin_(spin) {
  static_assert(sizeof(Flag) == 64, "one cache line per rank and parity");
  bytes_ = kAlign + 2 * sizeof(Flag) * size_ + 2 * slot_bytes_ * size_;
  std::string name;
  int fd = -1;
  if (rank_ == 0) {
    name = "/weft-d-" + random_secret().substr(0, 24);
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) fail(ErrorCode::kSystemError, "shm direct path: shm_open(create): {}", std::strerror(errno));
    if (ftruncate(fd, static_cast<off_t>(bytes_)) != 0) {
      const int e = errno;
      close(fd);
      shm_unlink(name.c_str());
      fail(ErrorCode::kSystemError, "shm direct path: ftruncate({} bytes): {}", bytes_, std::strerror(e));
    }
    store.set("direct_name", to_bytes(name));
  } else {
    name = to_string(store.get("direct_name", timeout));
    fd = shm_open(name.c_str(), O_RDWR, 0600);
    if (fd < 0) fail(ErrorCode::kSystemError, "shm direct path: shm_open({}): {}", name, std::strerror(errno));
  }
  base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    if (rank_ == 0) shm_unlink(name.c_str());
    fail(ErrorCode::kSystemError, "shm direct path: mmap: {}", std::strerror(errno));
  }
  // A fresh segment is zero: every flag says "posted 0". Everyone maps it before the name goes.
  store.add("direct_mapped", 1);
  const auto deadline = Clock::now() + timeout;
  while (store.add("direct_mapped", 0) < size_) {
    if (Clock::now() > deadline) {
      if (rank_ == 0) shm_unlink(name.c_str());
      fail(ErrorCode::kTimeout, "shm direct path: the ranks did not all map the segment within {} ms", timeout.count());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (rank_ == 0) shm_unlink(name.c_str());
  WEFT_LOG_DEBUG("shm direct path: {} ranks, slots of {} bytes, one round up to {} bytes{}{}", size_, slot_bytes_,
                 one_round_bytes_, piece_bytes_ ? fmt::format(", larger all-reduces in pieces of {} bytes", piece_bytes_) : "",
                 oversubscribed_ ? ", ranks outnumber cores: waiters yield" : "");
}

ShmDirect::~ShmDirect() {
  if (base_) munmap(base_, bytes_);
}

ShmDirect::Flag* ShmDirect::flag(int r, uint32_t c) const {
  return reinterpret_cast<Flag*>(static_cast<uint8_t*>(base_) + kAlign) + 2 * r + (c & 1);
}

uint8_t* ShmDirect::slot(int r, uint32_t c, uint64_t bytes) const {
  if (bytes <= kInlineBytes) return flag(r, c)->inline_data;
  return static_cast<uint8_t*>(base_) + kAlign + 2 * sizeof(Flag) * size_ + (static_cast<size_t>(r) * 2 + (c & 1)) * slot_bytes_;
}

bool ShmDirect::handles(const CollectiveArgs& a) const {
  if (size_ < 2) return false;
  const uint64_t bytes = a.count * dtype_size(a.dtype);
  switch (a.kind) {
    case CollectiveKind::kAllReduce: return bytes <= one_round_bytes_ || piece_bytes_ > 0;
    case CollectiveKind::kReduce:
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kAllGather: return bytes <= one_round_bytes_;  // all-gather: one rank's block
    case CollectiveKind::kBarrier: return true;
    default: return false;
  }
}

void ShmDirect::post(uint32_t c, uint64_t bytes, const DirectContext& ctx) {
  Flag* f = flag(rank_, c);
  f->signature.store(ctx.signature, std::memory_order_relaxed);
  f->bytes.store(bytes, std::memory_order_relaxed);
  f->seq.store(c, std::memory_order_seq_cst);  // releases the slot's bytes and the fields above
  if (f->sleepers.load(std::memory_order_seq_cst) != 0) futex(&f->seq, FUTEX_WAKE, INT_MAX, nullptr);
}

void ShmDirect::wait_for(int r, uint32_t c, const DirectContext& ctx, bool check, uint64_t expect_bytes) {
  Flag* f = flag(r, c);
  uint32_t seen = f->seq.load(std::memory_order_acquire);
  if (!reached(seen, c)) {
    const auto t0 = Clock::now();
    // Spin while the peer is likely to answer soon; with more ranks than cores it cannot answer
    // while this rank holds the core, so yield almost at once. Then sleep on the peer's flag
    // (it wakes us when it posts), waking every 5 ms for the deadline, aborts and dead peers.
    const auto spin = oversubscribed_ ? std::chrono::microseconds(2) : spin_;
    const auto yield_until = t0 + spin + (oversubscribed_ ? std::chrono::microseconds(2000) : spin * 3);
    auto next_check = t0 + std::chrono::milliseconds(5), next_watch = t0 + std::chrono::milliseconds(100);
    bool noted = false;
    for (uint32_t i = 0;; ++i) {
      seen = f->seq.load(std::memory_order_acquire);
      if (reached(seen, c)) break;
      if ((i & 63) != 0) {
        cpu_relax();
        continue;
      }
      const auto now = Clock::now();
      if (now < t0 + spin) continue;
      if (ctx.wait && !noted) {  // past the spin: the flight recorder shows whom this call waits for
        ctx.wait->note(r, 0, 0);
        noted = true;
      }
      if (now >= next_check) {
        next_check = now + std::chrono::milliseconds(5);
        if (ctx.abort && ctx.abort->load()) fail(ErrorCode::kRemoteError, "{}: aborted (weftCommAbort)", ctx.describe());
        if (now > ctx.deadline)
          fail(ErrorCode::kTimeout, "{}: timed out waiting for rank {} (it has not made this call)", ctx.describe(), r);
        if (ctx.transport)
          if (std::string why = ctx.transport->peer_failure(r); !why.empty())
            fail(ErrorCode::kRemoteError, "{}: rank {} failed: {}", ctx.describe(), r, why);
        if (now >= next_watch) {
          next_watch = now + std::chrono::milliseconds(100);
          if (ctx.watchdog) ctx.watchdog();
        }
      }
      if (now < yield_until) {
        sched_yield();
        continue;
      }
      f->sleepers.fetch_add(1, std::memory_order_seq_cst);
      seen = f->seq.load(std::memory_order_seq_cst);
      if (!reached(seen, c)) {
        timespec ts{0, 5'000'000};
        futex(&f->seq, FUTEX_WAIT, seen, &ts);
      }
      f->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    }
  }
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

void ShmDirect::all_reduce_pieces(const CollectiveArgs& a, const void* send, void* recv, const DirectContext& ctx) {
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
      reduce_into(a.dtype, a.op, mine, slot(0, c, bytes) + lo * es, slot(1, c, bytes) + lo * es, n_el);
      for (int r = 2; r < size_; ++r) reduce_inplace(a.dtype, a.op, mine, slot(r, c, bytes) + lo * es, n_el);
      if (a.op == RedOp::kAvg) finish_avg(a.dtype, mine, n_el, size_);
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

void ShmDirect::run(const CollectiveArgs& a, const void* send, void* recv, const DirectContext& ctx) {
  const uint64_t es = dtype_size(a.dtype), bytes = a.count * es;
  if (a.kind == CollectiveKind::kAllReduce && bytes > one_round_bytes_) {
    ++calls_;
    return all_reduce_pieces(a, send, recv, ctx);
  }
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
      reduce_into(a.dtype, a.op, recv, slot(0, c, bytes), slot(1, c, bytes), a.count);
      for (int r = 2; r < size_; ++r) reduce_inplace(a.dtype, a.op, recv, slot(r, c, bytes), a.count);
      if (a.op == RedOp::kAvg) finish_avg(a.dtype, recv, a.count, size_);
      return;
    }
    default: fail(ErrorCode::kInternalError, "shm direct path: {} is not handled", collective_name(a.kind));
  }
}

}  // namespace weft
