#include "runtime/comm/operation_queue.h"

#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/trace/flight_recorder.h"

namespace weft {

using Clock = std::chrono::steady_clock;

OperationQueue::OperationQueue(int rank, int size, AlgorithmSpec algorithm, Engine engine)
    : rank_(rank),
      engine_(std::move(engine)),
      spec_(std::move(algorithm)),
      p2p_send_seq_(size, 0),
      p2p_recv_seq_(size, 0),
      waiter_(engine_.spin) {
  drive_fn_ = [this] { return drive(); };
}

OperationQueue::~OperationQueue() { stop(); }

void OperationQueue::number(Operation& w) {
  const CollectiveKind kind = w.args_.kind;
  w.forced_ = spec_.empty() ? nullptr : spec_.resolve(kind, w.args_.count * dtype_size(w.args_.dtype));
  if (kind == CollectiveKind::kSend) {
    // Point-to-point messages are numbered per peer and direction (the tag's top bit set).
    w.seq_ = p2p_send_seq_[w.args_.root]++;
    w.tag_seq_ = static_cast<uint16_t>(0x8000u | (w.seq_ & 0x7fffu));
  } else if (kind != CollectiveKind::kRecv) {
    w.seq_ = next_seq_++;
    w.tag_seq_ = static_cast<uint16_t>(w.seq_ & 0x7fffu);
  }
  w.record_ = next_record_++;
}

void OperationQueue::number_recv(Operation& w) {
  w.seq_ = p2p_recv_seq_[w.args_.root]++;
  w.tag_seq_ = static_cast<uint16_t>(0x8000u | (w.seq_ & 0x7fffu));
}

void OperationQueue::submit(const std::shared_ptr<Operation>& w, bool async) {
  std::unique_lock<std::mutex> q(mu_);
  number(*w);
  const bool any_source = w->args_.kind == CollectiveKind::kRecv && w->args_.root < 0;
  if (!async && !inline_ && !busy_ && queue_.empty() && !any_source) {
    if (w->args_.kind == CollectiveKind::kRecv) number_recv(*w);
    inline_ = true;
    q.unlock();
    engine_.execute(w, {});
    q.lock();
    inline_ = false;
    const bool more = !queue_.empty();
    q.unlock();
    if (more) cv_.notify_all();
    return;
  }
  w->queued_ = true;
  if (recorder_) recorder_->queued(w->record_, w->seq_, w->args_, Clock::now());
  queue_.push_back(w);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  const bool wake = busy_;
  q.unlock();
  cv_.notify_all();
  if (wake) engine_.wake();  // the thread may sleep on the transport with operations in flight
  if (!async) {
    while (!w->test()) w->wait_done(std::chrono::hours(24));
  }
}

void OperationQueue::set_algorithm(AlgorithmSpec spec) {
  std::lock_guard<std::mutex> q(mu_);
  spec_ = std::move(spec);
}

std::string OperationQueue::algorithm() {
  std::lock_guard<std::mutex> q(mu_);
  return spec_.text();
}

void OperationQueue::wait_idle() {
  std::unique_lock<std::mutex> q(mu_);
  cv_.wait(q, [&] { return queue_.empty() && !busy_ && !inline_; });
}

void OperationQueue::stop() {
  {
    std::lock_guard<std::mutex> q(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OperationQueue::start(const std::shared_ptr<Operation>& w) {
  if (w->args_.kind == CollectiveKind::kRecv) {
    std::lock_guard<std::mutex> q(mu_);
    number_recv(*w);
  }
  std::unique_ptr<InFlight> f;
  if (engine_.begin(w, f)) {
    if (f) active_.push_back(std::move(f));
  } else {
    engine_.execute(w, active_.empty() ? std::function<bool()>() : drive_fn_);
  }
}

bool OperationQueue::start_held() {
  bool started = false;
  while (!held_.empty()) {
    std::shared_ptr<Operation> w = held_.front();
    if (w->args_.root < 0) {
      int peer = -1;
      try {
        peer = engine_.match_any(*w, [this](int p) {
          std::lock_guard<std::mutex> q(mu_);
          return static_cast<uint16_t>(p2p_recv_seq_[p]);
        });
      } catch (const Error& e) {
        held_.pop_front();
        w->finish(e.code(), e.what());
        held_since_ = Clock::now();
        continue;
      }
      if (peer < 0) {
        if (engine_.timeout.count() > 0 && Clock::now() - held_since_ > engine_.timeout) {
          held_.pop_front();
          w->finish(ErrorCode::kTimeout, fmt::format("recv from any source (count {}): no message arrived within the "
                                                     "timeout of {} ms (WEFT_TIMEOUT_MS or the group's)",
                                                     w->args_.count, engine_.timeout.count()));
          held_since_ = Clock::now();
          continue;
        }
        return started;
      }
      w->args_.root = peer;
    }
    held_.pop_front();
    held_since_ = Clock::now();
    start(w);
    started = true;
  }
  return started;
}

bool OperationQueue::drive() {
  bool moved = engine_.poll();
  for (size_t k = 0; k < active_.size();) {
    moved |= active_[k]->advance();
    if (active_[k]->finished()) {
      active_[k] = std::move(active_.back());
      active_.pop_back();
      moved = true;
    } else {
      ++k;
    }
  }
  return moved;
}

void OperationQueue::loop() {
  set_log_rank(rank_);
  std::unique_lock<std::mutex> q(mu_);
  std::deque<std::shared_ptr<Operation>> starting;
  for (;;) {
    if (active_.empty() && held_.empty()) {
      busy_ = false;
      cv_.notify_all();  // wait_idle()
      cv_.wait(q, [&] { return (!queue_.empty() && !inline_) || (stopping_ && queue_.empty()); });
      if (queue_.empty()) break;
    }
    if (inline_) {
      // Only with operations in flight can the thread get here while a blocking call runs
      // inline: never (inline calls need an idle queue), but keep the transport single-threaded.
      cv_.wait(q, [&] { return !inline_; });
    }
    busy_ = true;
    starting.swap(queue_);
    q.unlock();
    // Start what arrived, in submission order.
    for (auto& w : starting) {
      if (w->args_.kind == CollectiveKind::kRecv && (w->args_.root < 0 || !held_.empty())) {
        if (held_.empty()) held_since_ = Clock::now();
        held_.push_back(w);
      } else {
        start(w);
      }
      waiter_.moved();
    }
    starting.clear();
    // Advance everything in flight; wait when nothing moved.
    if (!active_.empty() || !held_.empty()) {
      const bool drove = drive();
      const bool started = start_held();
      if (drove || started) {
        waiter_.moved();
      } else {
        const auto now = Clock::now();
        const Waiter::Phase phase = waiter_.idle(now);
        if (phase != Waiter::Phase::kSpin) {
          for (auto& f : active_) f->idle(now);
          for (size_t k = 0; k < active_.size();) {
            if (active_[k]->finished()) {
              active_[k] = std::move(active_.back());
              active_.pop_back();
            } else {
              ++k;
            }
          }
        }
        if (phase == Waiter::Phase::kSleep && (!active_.empty() || !held_.empty())) {
          q.lock();
          const bool more = !queue_.empty();
          q.unlock();
          if (!more) engine_.sleep(now + std::chrono::milliseconds(50));
        }
      }
    }
    q.lock();
  }
}

}  // namespace weft
