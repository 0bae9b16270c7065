#include "runtime/comm/operation_queue.h"

#include "runtime/base/log.h"
#include "runtime/trace/flight_recorder.h"

namespace weft {

OperationQueue::OperationQueue(int rank, int size, std::string algorithm, Execute execute)
    : rank_(rank), execute_(std::move(execute)), algo_(std::move(algorithm)), p2p_send_seq_(size, 0), p2p_recv_seq_(size, 0) {}

OperationQueue::~OperationQueue() { stop(); }

void OperationQueue::submit(const std::shared_ptr<Operation>& w, bool async) {
  std::unique_lock<std::mutex> q(mu_);
  w->algo_ = algo_;
  const CollectiveKind kind = w->args_.kind;
  if (kind == CollectiveKind::kSend || kind == CollectiveKind::kRecv) {
    // Point-to-point messages are numbered per peer and direction (the tag's top bit set).
    auto& seq = kind == CollectiveKind::kSend ? p2p_send_seq_ : p2p_recv_seq_;
    w->seq_ = seq[w->args_.root]++;
    w->tag_seq_ = static_cast<uint16_t>(0x8000u | (w->seq_ & 0x7fffu));
  } else {
    w->seq_ = next_seq_++;
    w->tag_seq_ = static_cast<uint16_t>(w->seq_ & 0x7fffu);
  }
  w->record_ = next_record_++;
  if (!async && !running_ && queue_.empty()) {
    running_ = true;
    q.unlock();
    execute_(w);
    q.lock();
    running_ = false;
    const bool more = !queue_.empty();
    q.unlock();
    if (more) cv_.notify_all();
    return;
  }
  w->queued_ = true;
  if (recorder_) recorder_->queued(w->record_, w->seq_, w->args_, std::chrono::steady_clock::now());
  queue_.push_back(w);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  q.unlock();
  cv_.notify_all();
  if (!async) {
    while (!w->test()) w->wait_done(std::chrono::hours(24));
  }
}

void OperationQueue::set_algorithm(std::string id) {
  std::lock_guard<std::mutex> q(mu_);
  algo_ = std::move(id);
}

std::string OperationQueue::algorithm() {
  std::lock_guard<std::mutex> q(mu_);
  return algo_;
}

void OperationQueue::wait_idle() {
  std::unique_lock<std::mutex> q(mu_);
  cv_.wait(q, [&] { return queue_.empty() && !running_; });
}

void OperationQueue::stop() {
  {
    std::lock_guard<std::mutex> q(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OperationQueue::loop() {
  set_log_rank(rank_);
  std::unique_lock<std::mutex> q(mu_);
  for (;;) {
    cv_.wait(q, [&] { return (stopping_ && queue_.empty()) || (!queue_.empty() && !running_); });
    if (queue_.empty()) break;
    auto w = queue_.front();
    queue_.pop_front();
    running_ = true;
    q.unlock();
    execute_(w);
    q.lock();
    running_ = false;
    cv_.notify_all();
  }
}

}  // namespace weft
