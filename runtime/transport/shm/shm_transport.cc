#include "runtime/transport/shm/shm_transport.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <thread>

#include "collectives/reduce_kernels.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/transport/shm/shm_segment.h"

namespace weft {

using Clock = std::chrono::steady_clock;

namespace {

constexpr uint64_t kSlots = 32;         // descriptors per ordered pair of local ranks
constexpr size_t kInline = 4096 - 64;   // messages up to this size travel inside the descriptor
constexpr int kChunks = 4;              // staging buffers per ordered pair
constexpr size_t kChunkBytes = 1 << 20; // messages up to this size are staged; larger ones use CMA
constexpr uint32_t kMagic = 0x57454654;  // "WEFT"

enum SlotState : uint32_t { kFree = 0, kFull = 1, kConsumed = 2 };

struct alignas(64) RankArea {
  std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> sleeping;
};

struct alignas(64) RingHead {
  std::atomic<uint64_t> head;  // written by the sender: next sequence number
  char pad1[56];
  std::atomic<uint64_t> tail;  // written by the receiver: every seq below is consumed
  char pad2[56];
  std::atomic<uint32_t> chunk_busy[kChunks];  // set by the sender, cleared by the receiver
  // Set by the sender while a send waits for a descriptor or a staging chunk, cleared once its
  // backlog is empty: an idle receiver then takes every message off the ring, whether or not it
  // has posted its receive yet (take_unexpected_messages says why).
  std::atomic<uint32_t> sender_blocked;
  char pad3[64 - 4 * kChunks - 4];
};
static_assert(sizeof(RingHead) == 192, "ring head layout");

uint64_t g_probe_word = 0x5745465450524f42ULL;

}  // namespace

struct ShmTransport::Slot {
  std::atomic<uint32_t> state;
  uint32_t is_inline;  // 1: data[] holds the bytes; 2: staging chunk `chunk`; 0: read with CMA
  uint64_t seq;
  uint64_t tag;
  uint64_t len;
  uint64_t addr;
  std::atomic<uint64_t> acked;  // seq + 1: the receiver has finished reading message seq (0, as the
                               // segment starts, acknowledges nothing, so not message 0 either)
  uint32_t chunk;
  char pad[12];
  uint8_t data[kInline];
};

namespace {
constexpr size_t kSlotBytes = 4096;
}


struct ShmTransport::Segment {
  uint32_t magic;
  uint32_t local_size;
  char pad[56];
  // RankArea[local_size], then per pair (src, dst): RingHead + Slot[kSlots]
};

namespace {
size_t pair_bytes() { return sizeof(RingHead) + kSlots * 4096 + kChunks * kChunkBytes; }
size_t segment_bytes(int l) { return 64 + sizeof(RankArea) * l + pair_bytes() * l * l; }
}  // namespace

bool ShmTransport::usable() {
  static const bool ok = [] {
    if (FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r")) {
      int scope = 0;
      bool read = std::fscanf(f, "%d", &scope) == 1;
      std::fclose(f);
      if (read && scope > 0) {
        WEFT_LOG_INFO("kernel.yama.ptrace_scope={} forbids cross-memory attach between ranks; using UCX", scope);
        return false;
      }
    }
    uint64_t v = 0;
  iovec local{&v, sizeof v}, remote{&g_probe_word, sizeof v};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == sizeof v && v == g_probe_word;
  }();
  return ok;
}

ShmTransport::ShmTransport(std::shared_ptr<Store> store, int rank, int size, const std::vector<int>& node_of_rank,
                           std::unique_ptr<Transport> remote, Millis timeout)
    : rank_(rank), size_(size), peers_(size), remote_(std::move(remote)) {
  std::vector<int> locals;
  for (int r = 0; r < size; ++r)
    if (node_of_rank[r] == node_of_rank[rank]) locals.push_back(r);
  local_size_ = static_cast<int>(locals.size());
  for (int i = 0; i < local_size_; ++i) {
    peers_[locals[i]].local = i;
    if (locals[i] == rank) my_local_ = i;
  }
  for (int r = 0; r < size; ++r) {
    if (peers_[r].local < 0 && !remote_) fail(ErrorCode::kInternalError, "shm transport: rank {} is remote and no remote transport", r);
  }
  auto pids = store_all_gather(*store, "shm_pid", rank, size, to_bytes(std::to_string(getpid())), timeout);
  for (int r = 0; r < size; ++r) peers_[r].pid = std::stoi(to_string(pids[r]));
  if (local_size_ == 1) return;

  const int node = node_of_rank[rank];
  bytes_ = segment_bytes(local_size_);
  ShmSegmentSpec spec;
  spec.what = "shm transport";
  spec.name_prefix = "/weft-";
  spec.name_key = fmt::format("shm_name/{}", node);
  spec.mapped_key = fmt::format("shm_mapped/{}", node);
  spec.creator = my_local_ == 0;
  spec.participants = local_size_;
  spec.bytes = bytes_;
  spec.timeout = timeout;
  spec.init = [this](void* base) {
    auto* seg = static_cast<Segment*>(base);
    seg->magic = kMagic;
    seg->local_size = static_cast<uint32_t>(local_size_);
  };
  base_ = map_shared_segment(*store, spec);
  WEFT_LOG_DEBUG("shm transport: {} local ranks, {} KiB segment", local_size_, bytes_ >> 10);
}

ShmTransport::~ShmTransport() {
  shutdown("transport closed");
  if (base_) munmap(base_, bytes_);
}

ShmTransport::Slot* ShmTransport::slot(int src, int dst, uint64_t seq) {
  static_assert(sizeof(Slot) == kSlotBytes, "slot layout");
  auto* p = static_cast<uint8_t*>(base_) + 64 + sizeof(RankArea) * local_size_ +
            pair_bytes() * (static_cast<size_t>(src) * local_size_ + dst);
  return reinterpret_cast<Slot*>(p + sizeof(RingHead)) + (seq % kSlots);
}

namespace {
RingHead* ring_of(void* base, int l, int src, int dst) {
  auto* p = static_cast<uint8_t*>(base) + 64 + sizeof(RankArea) * l + pair_bytes() * (static_cast<size_t>(src) * l + dst);
  return reinterpret_cast<RingHead*>(p);
}
uint8_t* chunk_of(void* base, int l, int src, int dst, uint32_t c) {
  return reinterpret_cast<uint8_t*>(ring_of(base, l, src, dst)) + sizeof(RingHead) + kSlots * 4096 + c * kChunkBytes;
}
RankArea* area_of(void* base, int local) { return reinterpret_cast<RankArea*>(static_cast<uint8_t*>(base) + 64) + local; }
}  // namespace

void ShmTransport::ring_doorbell(int local) {
  RankArea* a = area_of(base_, local);
  a->doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (a->sleeping.load(std::memory_order_seq_cst)) shm_futex(&a->doorbell, FUTEX_WAKE, INT_MAX, nullptr);
}

bool ShmTransport::collect_acks(int peer) {
  Peer& p = peers_[peer];
  if (p.awaiting.empty()) return false;
  // A message is read once the receiver acknowledged it or moved its tail past it (which it
  // does only over consumed descriptors, so a reused descriptor cannot hide an acknowledgement).
  uint64_t tail = ring_of(base_, local_size_, my_local_, p.local)->tail.load(std::memory_order_acquire);
  size_t k = 0;
  bool any = false;
  for (auto& a : p.awaiting) {
    if (a.seq < tail || slot(my_local_, p.local, a.seq)->acked.load(std::memory_order_acquire) == a.seq + 1) {
      a.op->state.store(TransportOp::kDone, std::memory_order_release);
      any = true;
    } else {
      p.awaiting[k++] = a;
    }
  }
  p.awaiting.resize(k);
  return any;
}

bool ShmTransport::try_send(int peer, const PendingSend& s) {
  Peer& p = peers_[peer];
  collect_acks(peer);
  RingHead* ring = ring_of(base_, local_size_, my_local_, p.local);
  // Out of descriptors or staging chunks: tell the receiver, which then frees them all, even
  // those holding messages it has no receive for yet (take_unexpected_messages), and rings back.
  auto blocked = [&] {
    if (!ring->sender_blocked.load(std::memory_order_relaxed)) {
      ring->sender_blocked.store(1, std::memory_order_seq_cst);
      ring_doorbell(p.local);
    }
    return false;
  };
  uint64_t seq = ring->head.load(std::memory_order_relaxed);
  if (seq - ring->tail.load(std::memory_order_acquire) >= kSlots) return blocked();  // ring full
  Slot* sl = slot(my_local_, p.local, seq);
  int mode = s.len <= kInline ? 1 : s.len <= kChunkBytes ? 2 : 0;
  uint32_t chunk = 0;
  if (mode == 2) {
    while (chunk < kChunks && ring->chunk_busy[chunk].load(std::memory_order_acquire)) ++chunk;
    if (chunk == kChunks) return blocked();  // every staging buffer is still being read
    std::memcpy(chunk_of(base_, local_size_, my_local_, p.local, chunk), s.buf, s.len);
    ring->chunk_busy[chunk].store(1, std::memory_order_relaxed);
  }
  sl->seq = seq;
  sl->tag = s.tag;
  sl->len = s.len;
  sl->chunk = chunk;
  sl->is_inline = static_cast<uint32_t>(mode);
  bool inl = mode != 0;
  if (mode == 1) {
    if (s.len) std::memcpy(sl->data, s.buf, s.len);
  } else if (mode == 0) {
    sl->addr = reinterpret_cast<uint64_t>(s.buf);
  }
  sl->state.store(kFull, std::memory_order_release);
  ring->head.store(seq + 1, std::memory_order_release);
  if (inl) {
    s.op->bytes = s.len;
    s.op->state.store(TransportOp::kDone, std::memory_order_release);
  } else {
    p.awaiting.push_back({seq, s.op});
  }
  ring_doorbell(p.local);
  return true;
}

void ShmTransport::post_send(int peer, uint64_t tag, const void* buf, size_t len, TransportOp* op) {
  op->peer = peer;
  op->bytes = len;
  if (peers_[peer].local < 0) return remote_->post_send(peer, tag, buf, len, op);
  if (shut_) {
    op->error = ErrorCode::kRemoteError;
    op->error_message = shut_why_;
    op->state.store(TransportOp::kFailed, std::memory_order_release);
    return;
  }
  op->state.store(TransportOp::kPending, std::memory_order_relaxed);
  PendingSend s{tag & kTagMask, buf, len, op};
  Peer& p = peers_[peer];
  if (!p.backlog.empty() || !try_send(peer, s)) p.backlog.push_back(s);
}

// Reads a rendezvous message (cross-memory attach) from the sender's memory into `into`.
bool ShmTransport::read_rendezvous(int src, const Slot* sl, uint8_t* into, std::string& why) {
  const Peer& p = peers_[src];
  const size_t len = sl->len;
  size_t done = 0;
  while (done < len) {
    iovec local{into + done, len - done};
    iovec remote{reinterpret_cast<void*>(sl->addr + done), len - done};
    ssize_t k = process_vm_readv(p.pid, &local, 1, &remote, 1, 0);
    if (k <= 0) {
      why = fmt::format("reading rank {}'s memory (pid {}) failed: {}", src, p.pid,
                        errno == ESRCH ? "the process is gone" : std::strerror(errno));
      return false;
    }
    done += static_cast<size_t>(k);
  }
  return true;
}

// The message's bytes have been read: free its staging chunk, acknowledge it (a rendezvous
// sender's send completes) and mark its descriptor consumed (the tail passes it).
void ShmTransport::release(int src, Slot* sl) {
  Peer& p = peers_[src];
  bool wake_sender = sl->is_inline != 1;
  if (sl->is_inline == 2) ring_of(base_, local_size_, p.local, my_local_)->chunk_busy[sl->chunk].store(0, std::memory_order_release);
  sl->acked.store(sl->seq + 1, std::memory_order_release);
  sl->state.store(kConsumed, std::memory_order_release);
  if (wake_sender) ring_doorbell(p.local);
}

bool ShmTransport::deliver(int src, Slot* sl, PostedRecv& r) {
  Peer& p = peers_[src];
  TransportOp* op = r.op;
  op->sender_tag = sl->tag;
  op->bytes = sl->len;
  bool ok = true;
  const size_t len = sl->len;
  const uint8_t* staged = sl->is_inline == 1 ? sl->data
                          : sl->is_inline == 2 ? chunk_of(base_, local_size_, p.local, my_local_, sl->chunk)
                                               : nullptr;
  if (len > r.len) {
    op->error = ErrorCode::kInvalidUsage;
    op->error_message = "message truncated";
    ok = false;
  } else if (staged) {
    if (r.other) {
      reduce_into(r.dtype, r.redop, r.buf, staged, r.other, len / dtype_size(r.dtype));
    } else if (len) {
      std::memcpy(r.buf, staged, len);
    }
  } else {
    // Cross-memory attach: straight into the destination, or into a bounce buffer when the
    // destination is also the reduction's other operand.
    uint8_t* land = static_cast<uint8_t*>(r.buf);
    if (r.other && r.other == r.buf) {
      if (bounce_.size() < len) bounce_.resize(len);
      land = bounce_.data();
    }
    ok = read_rendezvous(src, sl, land, op->error_message);
    if (!ok) op->error = ErrorCode::kRemoteError;
    if (ok && r.other) reduce_into(r.dtype, r.redop, r.buf, land, r.other, len / dtype_size(r.dtype));
  }
  release(src, sl);
  op->state.store(ok ? TransportOp::kDone : TransportOp::kFailed, std::memory_order_release);
  return true;
}

// Takes every message still on the ring from src (none has a receive posted: poll_incoming
// delivered those first) into this process's memory, so that the sender gets its descriptors,
// staging chunks and rendezvous buffers back.
bool ShmTransport::stash_unexpected(int src, uint64_t tail, uint64_t head) {
  Peer& p = peers_[src];
  bool any = false;
  for (uint64_t seq = tail; seq < head; ++seq) {
    Slot* sl = slot(p.local, my_local_, seq);
    if (sl->state.load(std::memory_order_acquire) != kFull) continue;
    Unexpected u{sl->tag, std::vector<uint8_t>(sl->len), {}};
    if (sl->is_inline == 1) {
      if (sl->len) std::memcpy(u.bytes.data(), sl->data, sl->len);
    } else if (sl->is_inline == 2) {
      if (sl->len) std::memcpy(u.bytes.data(), chunk_of(base_, local_size_, p.local, my_local_, sl->chunk), sl->len);
    } else if (!read_rendezvous(src, sl, u.bytes.data(), u.error)) {
      u.bytes.clear();
    }
    p.unexpected.push_back(std::move(u));
    release(src, sl);
    any = true;
  }
  if (any) ring_doorbell(p.local);  // also for inline messages: the sender waits for descriptors
  return any;
}

// A receive being posted: the oldest message taken off the ring early that matches it, if any,
// lands now. Messages left the ring in order, so these are older than any still on it.
bool ShmTransport::take_unexpected(int src, PostedRecv& r) {
  Peer& p = peers_[src];
  for (size_t i = 0; i < p.unexpected.size(); ++i) {
    Unexpected& u = p.unexpected[i];
    if ((u.tag & r.mask) != (r.tag & r.mask)) continue;
    TransportOp* op = r.op;
    op->sender_tag = u.tag;
    op->bytes = u.bytes.size();
    bool ok = true;
    if (!u.error.empty()) {
      op->error = ErrorCode::kRemoteError;
      op->error_message = u.error;
      ok = false;
    } else if (u.bytes.size() > r.len) {
      op->error = ErrorCode::kInvalidUsage;
      op->error_message = "message truncated";
      ok = false;
    } else if (r.other) {
      reduce_into(r.dtype, r.redop, r.buf, u.bytes.data(), r.other, u.bytes.size() / dtype_size(r.dtype));
    } else if (!u.bytes.empty()) {
      std::memcpy(r.buf, u.bytes.data(), u.bytes.size());
    }
    p.unexpected.erase(p.unexpected.begin() + static_cast<long>(i));
    op->state.store(ok ? TransportOp::kDone : TransportOp::kFailed, std::memory_order_release);
    return true;
  }
  return false;
}

bool ShmTransport::poll_incoming(int src, bool take_all) {
  Peer& p = peers_[src];
  RingHead* ring = ring_of(base_, local_size_, p.local, my_local_);
  uint64_t head = ring->head.load(std::memory_order_acquire);
  uint64_t tail = ring->tail.load(std::memory_order_relaxed);
  bool any = false;
  if (!p.posted.empty()) {
    for (uint64_t seq = tail; seq < head && !p.posted.empty(); ++seq) {
      Slot* sl = slot(p.local, my_local_, seq);
      if (sl->state.load(std::memory_order_acquire) != kFull) continue;
      for (size_t i = 0; i < p.posted.size(); ++i) {
        PostedRecv& r = p.posted[i];
        if ((sl->tag & r.mask) == (r.tag & r.mask)) {
          deliver(src, sl, r);
          p.posted.erase(p.posted.begin() + static_cast<long>(i));
          any = true;
          break;
        }
      }
    }
  }
  // What no posted receive matched (take_unexpected_messages says when and why).
  if (take_all && head > tail) any |= stash_unexpected(src, tail, head);
  while (tail < head && slot(p.local, my_local_, tail)->state.load(std::memory_order_acquire) == kConsumed) {
    slot(p.local, my_local_, tail)->state.store(kFree, std::memory_order_relaxed);
    ++tail;
  }
  ring->tail.store(tail, std::memory_order_release);
  return any;
}

// Deadlock avoidance (issue 44). A sender takes a pair's descriptors (32) and staging chunks (4)
// in the order it posts its sends; they come back only as the receiver consumes the messages, in
// the order it posts its receives, and the two orders differ: an executor starts whatever became
// ready (the tree all-reduce's leaf started its up-slices 12-15 before 8-11 when the window's
// receives of 4-7 and 0-3 completed in one pass), and a rank that finished a call already sends
// the next call's messages. When the messages holding all the chunks (or descriptors) are ones the
// receiver will only take after a message that waits in the sender's backlog behind them, neither
// side can move: the parent's slot ring had room for slices 8-11, its chunks held 12-15, and the
// tree stopped this way in about one run in four (3 ranks, 4-8 MiB). So a sender out of
// descriptors or chunks says so (RingHead::sender_blocked), and a receiver with nothing else to
// do takes every message of that sender off the ring into its own memory, where a receive posted
// later finds it (take_unexpected): whatever the two orders, a blocked sender always gets its
// resources back. Only from wait_for_event, i.e. once the executor found no progress to make:
// in a pipeline that flows, the receives come soon and the messages land with one copy.
bool ShmTransport::probe(int peer, uint64_t tag, uint64_t mask) {
  Peer& p = peers_[peer];
  if (p.local < 0) return remote_->probe(peer, tag, mask);
  if (!base_ || shut_) return false;
  tag &= kTagMask, mask &= kTagMask;
  for (const Unexpected& u : p.unexpected)
    if ((u.tag & mask) == (tag & mask)) return true;
  RingHead* ring = ring_of(base_, local_size_, p.local, my_local_);
  const uint64_t head = ring->head.load(std::memory_order_acquire);
  for (uint64_t seq = ring->tail.load(std::memory_order_relaxed); seq < head; ++seq) {
    Slot* sl = slot(p.local, my_local_, seq);
    if (sl->state.load(std::memory_order_acquire) == kFull && (sl->tag & mask) == (tag & mask)) return true;
  }
  return false;
}

bool ShmTransport::take_unexpected_messages() {
  bool any = false;
  for (int r = 0; r < size_; ++r) {
    Peer& p = peers_[r];
    if (p.local < 0 || r == rank_) continue;
    if (ring_of(base_, local_size_, p.local, my_local_)->sender_blocked.load(std::memory_order_acquire))
      any |= poll_incoming(r, true);
  }
  return any;
}

void ShmTransport::post_recv(int peer, uint64_t tag, uint64_t mask, void* buf, size_t len, TransportOp* op) {
  op->peer = peer;
  if (peers_[peer].local < 0) return remote_->post_recv(peer, tag, mask, buf, len, op);
  if (shut_) {
    op->error = ErrorCode::kRemoteError;
    op->error_message = shut_why_;
    op->state.store(TransportOp::kFailed, std::memory_order_release);
    return;
  }
  op->state.store(TransportOp::kPending, std::memory_order_relaxed);
  PostedRecv r{tag & kTagMask, mask & kTagMask, buf, len, op, nullptr, DataType::kFloat32, RedOp::kSum};
  if (!peers_[peer].unexpected.empty() && take_unexpected(peer, r)) return;
  peers_[peer].posted.push_back(r);
  poll_incoming(peer);
}

void ShmTransport::post_recv_reduce(int peer, uint64_t tag, uint64_t mask, void* dst, const void* other, size_t len,
                                    DataType dtype, RedOp redop, TransportOp* op) {
  op->peer = peer;
  if (peers_[peer].local < 0 || shut_) {
    // Remote peers: land the bytes, then reduce (dst may be other, so through the bounce buffer).
    fail(ErrorCode::kInternalError, "shm transport: receive-reduce from a remote rank");
  }
  op->state.store(TransportOp::kPending, std::memory_order_relaxed);
  PostedRecv r{tag & kTagMask, mask & kTagMask, dst, len, op, other, dtype, redop};
  if (!peers_[peer].unexpected.empty() && take_unexpected(peer, r)) return;
  peers_[peer].posted.push_back(r);
  poll_incoming(peer);
}

bool ShmTransport::progress() {
  bool any = remote_ ? remote_->progress() : false;
  if (!base_) return any;
  for (int r = 0; r < size_; ++r) {
    Peer& p = peers_[r];
    if (p.local < 0 || r == rank_) continue;
    // Sends: finished rendezvous reads, then whatever waits for a free descriptor.
    any |= collect_acks(r);
    while (!p.backlog.empty() && try_send(r, p.backlog.front())) {
      p.backlog.erase(p.backlog.begin());
      any = true;
    }
    if (p.backlog.empty()) {
      RingHead* out = ring_of(base_, local_size_, my_local_, p.local);
      if (out->sender_blocked.load(std::memory_order_relaxed)) out->sender_blocked.store(0, std::memory_order_release);
    }
    if (!p.posted.empty()) any |= poll_incoming(r);
  }
  return any;
}

void ShmTransport::wait_for_event(Clock::time_point deadline) {
  if (remote_) {
    // Mixed: UCX's event fd covers the remote peers; look at shared memory every 200 us.
    if (progress() || (base_ && take_unexpected_messages())) return;
    remote_->wait_for_event(std::min(deadline, Clock::now() + std::chrono::microseconds(200)));
    return;
  }
  if (!base_) {
    std::this_thread::sleep_until(std::min(deadline, Clock::now() + std::chrono::milliseconds(10)));
    return;
  }
  RankArea* me = area_of(base_, my_local_);
  me->sleeping.store(1, std::memory_order_seq_cst);
  uint32_t v = me->doorbell.load(std::memory_order_seq_cst);
  if (progress() || take_unexpected_messages()) {
    me->sleeping.store(0, std::memory_order_relaxed);
    return;
  }
  auto left = deadline - Clock::now();
  if (left > std::chrono::milliseconds(50)) left = std::chrono::milliseconds(50);
  if (left > Clock::duration::zero()) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    shm_futex(&me->doorbell, FUTEX_WAIT, v, &ts);
  }
  me->sleeping.store(0, std::memory_order_relaxed);
}

void ShmTransport::interrupt() {
  if (remote_) remote_->interrupt();
  if (base_) ring_doorbell(my_local_);
}

void ShmTransport::shutdown(const std::string& why) {
  if (remote_) remote_->shutdown(why);
  if (shut_) return;
  shut_ = true;
  shut_why_ = why;
  auto fail_op = [&](TransportOp* op) {
    op->error = ErrorCode::kRemoteError;
    op->error_message = why;
    op->state.store(TransportOp::kFailed, std::memory_order_release);
  };
  // Receives are simply forgotten (only this process writes into their buffers); sends waiting
  // for a peer's read are failed: the peer may still read their bytes, never write them.
  for (auto& p : peers_) {
    for (auto& r : p.posted) fail_op(r.op);
    for (auto& s : p.backlog) fail_op(s.op);
    for (auto& a : p.awaiting) fail_op(a.op);
    p.posted.clear();
    p.backlog.clear();
    p.awaiting.clear();
    p.unexpected.clear();
  }
}

std::string ShmTransport::peer_failure(int peer) const {
  if (peers_[peer].local < 0) return remote_->peer_failure(peer);
  const int pid = peers_[peer].pid;
  if (pid <= 0) return {};
  if (kill(pid, 0) != 0 && errno == ESRCH) return fmt::format("rank {} (pid {}) is gone", peer, pid);
  // A killed rank whose parent has not reaped it yet is a zombie: still "there" for kill(0).
  if (FILE* f = std::fopen(fmt::format("/proc/{}/stat", pid).c_str(), "r")) {
    char buf[256] = {};
    size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    const char* close = static_cast<const char*>(memrchr(buf, ')', n));
    if (close && close + 2 < buf + n && (close[2] == 'Z' || close[2] == 'X')) {
      return fmt::format("rank {} (pid {}) has exited", peer, pid);
    }
  }
  return {};
}

}  // namespace weft
