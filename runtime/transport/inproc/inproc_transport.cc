#include "runtime/transport/inproc/inproc_transport.h"

#include <cstring>

namespace weft {

InprocFabric::InprocFabric(int size) {
  for (int i = 0; i < size; ++i) boxes_.push_back(std::make_unique<Mailbox>());
}

InprocTransport::InprocTransport(std::shared_ptr<InprocFabric> fabric, int rank)
    : fabric_(std::move(fabric)), rank_(rank) {}

InprocTransport::~InprocTransport() { shutdown("transport destroyed"); }

namespace {

void finish_recv(TransportOp* op, int src, uint64_t tag, const void* data, size_t len, size_t cap, void* buf) {
  op->sender_tag = tag;
  op->peer = src;
  if (len > cap) {
    op->bytes = len;
    op->error = ErrorCode::kInvalidUsage;
    op->error_message = "message truncated";
    op->state.store(TransportOp::kFailed, std::memory_order_release);
    return;
  }
  if (len) std::memcpy(buf, data, len);
  op->bytes = len;
  op->state.store(TransportOp::kDone, std::memory_order_release);
}

bool matches(const InprocFabric::Posted& p, int src, uint64_t tag) {
  return p.src == src && (p.tag & p.mask) == (tag & p.mask);
}

}  // namespace

void InprocTransport::post_send(int peer, uint64_t tag, const void* buf, size_t len, TransportOp* op) {
  tag &= kTagMask;
  op->peer = peer;
  op->state.store(TransportOp::kPending, std::memory_order_relaxed);
  auto& box = fabric_->box(peer);
  {
    std::lock_guard<std::mutex> lock(box.mu);
    bool delivered = false;
    for (auto it = box.posted.begin(); it != box.posted.end(); ++it) {
      if (matches(*it, rank_, tag)) {
        finish_recv(it->op, rank_, tag, buf, len, it->len, it->buf);
        box.posted.erase(it);
        delivered = true;
        break;
      }
    }
    if (!delivered) {
      auto* b = static_cast<const uint8_t*>(buf);
      box.unexpected.push_back({rank_, tag, std::vector<uint8_t>(b, b + len)});
    }
    box.events++;
  }
  box.cv.notify_all();
  op->bytes = len;
  op->state.store(TransportOp::kDone, std::memory_order_release);  // eager: the bytes are copied
}

bool InprocTransport::probe(int peer, uint64_t tag, uint64_t mask) {
  tag &= kTagMask;
  mask &= kTagMask;
  auto& box = fabric_->box(rank_);
  std::lock_guard<std::mutex> lock(box.mu);
  for (const auto& m : box.unexpected)
    if (m.src == peer && (m.tag & mask) == (tag & mask)) return true;
  return false;
}

void InprocTransport::post_recv(int peer, uint64_t tag, uint64_t mask, void* buf, size_t len, TransportOp* op) {
  tag &= kTagMask;
  mask &= kTagMask;
  op->peer = peer;
  op->state.store(TransportOp::kPending, std::memory_order_relaxed);
  auto& box = fabric_->box(rank_);
  std::lock_guard<std::mutex> lock(box.mu);
  if (shut_) {
    op->error = ErrorCode::kRemoteError;
    op->error_message = "transport shut down";
    op->state.store(TransportOp::kFailed, std::memory_order_release);
    return;
  }
  for (auto it = box.unexpected.begin(); it != box.unexpected.end(); ++it) {
    if (it->src == peer && (it->tag & mask) == (tag & mask)) {
      finish_recv(op, peer, it->tag, it->data.data(), it->data.size(), len, buf);
      box.unexpected.erase(it);
      return;
    }
  }
  box.posted.push_back({peer, tag, mask, buf, len, op});
}

bool InprocTransport::progress() {
  // Completion happens in the sender's thread; report whether anything arrived since last look.
  auto& box = fabric_->box(rank_);
  std::lock_guard<std::mutex> lock(box.mu);
  bool moved = box.events != seen_events_;
  seen_events_ = box.events;
  return moved;
}

void InprocTransport::wait_for_event(std::chrono::steady_clock::time_point deadline) {
  auto& box = fabric_->box(rank_);
  std::unique_lock<std::mutex> lock(box.mu);
  box.cv.wait_until(lock, deadline, [&] { return box.events != seen_events_ || box.interrupted; });
  box.interrupted = false;
}

void InprocTransport::interrupt() {
  auto& box = fabric_->box(rank_);
  {
    std::lock_guard<std::mutex> lock(box.mu);
    box.interrupted = true;
  }
  box.cv.notify_all();
}

void InprocTransport::shutdown(const std::string& why) {
  auto& box = fabric_->box(rank_);
  std::lock_guard<std::mutex> lock(box.mu);
  shut_ = true;
  for (auto& p : box.posted) {
    p.op->error = ErrorCode::kRemoteError;
    p.op->error_message = why;
    p.op->state.store(TransportOp::kFailed, std::memory_order_release);
  }
  box.posted.clear();
  box.unexpected.clear();
}

}  // namespace weft

#include <map>

#include "runtime/store/store.h"

namespace weft {

std::shared_ptr<InprocFabric> inproc_fabric_for(Store& store, int rank, int size, std::chrono::milliseconds timeout) {
  static std::mutex mu;
  static std::map<uint64_t, std::weak_ptr<InprocFabric>> registry;
  static uint64_t next_id = 1;
  if (rank == 0) {
    auto fabric = std::make_shared<InprocFabric>(size);
    uint64_t id;
    {
      std::lock_guard<std::mutex> lock(mu);
      id = next_id++;
      registry[id] = fabric;
    }
    store.set("inproc_fabric", to_bytes(std::to_string(id)));
    // Keep it registered until every rank has picked it up.
    if (size > 1) store.get("inproc_fabric_taken_" + std::to_string(size - 1), timeout);
    return fabric;
  }
  uint64_t id = std::stoull(to_string(store.get("inproc_fabric", timeout)));
  std::shared_ptr<InprocFabric> fabric;
  {
    std::lock_guard<std::mutex> lock(mu);
    fabric = registry[id].lock();
  }
  if (!fabric) fail(ErrorCode::kInternalError, "inproc fabric {} vanished", id);
  int64_t taken = store.add("inproc_fabric_taken", 1);
  store.set("inproc_fabric_taken_" + std::to_string(taken), {});
  return fabric;
}

}  // namespace weft
