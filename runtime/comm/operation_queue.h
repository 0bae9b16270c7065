// OperationQueue: the order in which a communicator's operations run. Every operation gets its
// sequence number (the tag's) here, in submission order. A blocking call on an idle queue runs
// inline on the caller's thread (no hand-off, the lowest latency); asynchronous calls go, in
// order, to a progress thread started on first use, which runs one at a time and sleeps on a
// condition variable when the queue is empty (an idle communicator costs no CPU). A blocking
// call made while async work is queued waits behind it.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/operation.h"

namespace weft {

class FlightRecorder;

class OperationQueue {
 public:
  using Execute = std::function<void(const std::shared_ptr<Operation>&)>;
  OperationQueue(int rank, int size, std::string algorithm, Execute execute);
  ~OperationQueue();
  OperationQueue(const OperationQueue&) = delete;
  OperationQueue& operator=(const OperationQueue&) = delete;

  // Numbers op, stamps it with the algorithm in force, and runs it (inline when blocking and
  // idle) or queues it. A blocking call returns once op has finished.
  void submit(const std::shared_ptr<Operation>& op, bool async);
  // A blocking call's fast path: if nothing is queued or running and the algorithm in force is
  // the automatic one, numbers the call and runs fn(seq, record) on the caller's thread, returning true
  // once it returned; otherwise returns false at once, having numbered nothing. fn must not throw.
  template <class Fn>
  bool run_inline(Fn&& fn) {
    std::unique_lock<std::mutex> q(mu_);
    if (running_ || !queue_.empty() || !algo_.empty()) return false;
    const uint64_t seq = next_seq_++;
    const uint64_t record = next_record_++;
    running_ = true;
    q.unlock();
    fn(seq, record);
    q.lock();
    running_ = false;
    q.unlock();
    cv_.notify_all();  // the progress thread (queued meanwhile) or wait_idle()
    return true;
  }
  // The algorithm id stamped on operations submitted from now on ("" = automatic).
  void set_algorithm(std::string id);
  std::string algorithm();
  // Operations queued for the progress thread are recorded here as queued (nullptr: none).
  void set_recorder(FlightRecorder* recorder) { recorder_ = recorder; }
  // Returns once nothing is queued or running.
  void wait_idle();
  // Runs what is queued, then ends the progress thread.
  void stop();

 private:
  void loop();

  const int rank_;
  Execute execute_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Operation>> queue_;
  bool running_ = false;  // an operation is executing (inline or on the thread)
  bool stopping_ = false;
  std::thread thread_;
  std::string algo_;
  uint64_t next_seq_ = 0;
  uint64_t next_record_ = 0;
  FlightRecorder* recorder_ = nullptr;
  std::vector<uint16_t> p2p_send_seq_, p2p_recv_seq_;  // per peer
};

}  // namespace weft
