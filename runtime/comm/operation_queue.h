// OperationQueue: the order in which a communicator's operations start, and the progress engine
// that advances every operation in flight at once. Every operation gets its sequence number (the
// tag's) here, in submission order: collectives one sequence, point-to-point messages one per peer
// and direction, so that no two operations in flight share a tag.
//
// A blocking call on an idle communicator runs inline on the caller's thread (no hand-off, the
// lowest latency). Everything else goes, in order, to a progress thread started on first use. It
// starts each operation as soon as it reaches it: one that runs as a schedule (every
// point-to-point message, and collectives on the scheduled algorithms) joins the operations in
// flight, which the thread advances together (poll the transport once, advance each) and waits
// for with one Waiter; one that runs as a blocking protocol of its own (the shared-memory latency
// path, windows (weftMemAlloc), NCCL) runs there and then, driving the operations in flight whenever
// it waits. So sends and receives posted in any order complete once each has its match, and many
// collectives move at once. The thread sleeps on a condition variable when nothing is in flight
// (an idle communicator costs no CPU).
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/algorithm_spec.h"
#include "runtime/base/waiter.h"
#include "runtime/comm/operation.h"

namespace weft {

class FlightRecorder;

// An operation in flight on the progress thread, beside others. It ends its Operation itself
// (successfully or with its error) and then reports finished().
class InFlight {
 public:
  virtual ~InFlight() = default;
  // Posts and collects what it can without waiting; true when anything moved.
  virtual bool advance() = 0;
  // Nothing moved for a while: the checks that end a wait (deadline, weftCommAbort, a dead peer).
  virtual void idle(std::chrono::steady_clock::time_point now) = 0;
  virtual bool finished() const = 0;
};

// What the progress engine needs from its communicator.
struct Engine {
  // Starts w in flight (true; `out` is null when it already ended), or returns false: w runs alone
  // with execute().
  std::function<bool(const std::shared_ptr<Operation>& w, std::unique_ptr<InFlight>& out)> begin;
  // Runs w to its end on this thread; `others` drives the operations in flight while it waits
  // (true when one moved; empty when none are).
  std::function<void(const std::shared_ptr<Operation>& w, const std::function<bool()>& others)> execute;
  std::function<bool()> poll;                                          // drives the transport
  std::function<void(std::chrono::steady_clock::time_point)> sleep;  // until an event, wake() or then
  std::function<void()> wake;                                         // any thread
  // A receive from any source: the peer whose next message (sequence next_seq(peer)) has arrived,
  // or -1 when none has yet. May throw (a transport that cannot probe).
  std::function<int(const Operation& w, const std::function<uint16_t(int)>& next_seq)> match_any;
  std::chrono::milliseconds timeout{0};  // how long a receive from any source waits for a message
  std::chrono::microseconds spin{50};
};

class OperationQueue {
 public:
  OperationQueue(int rank, int size, AlgorithmSpec algorithm, Engine engine);
  ~OperationQueue();
  OperationQueue(const OperationQueue&) = delete;
  OperationQueue& operator=(const OperationQueue&) = delete;

  // Numbers op, stamps it with the algorithm in force, and runs it (inline when blocking and
  // idle) or hands it to the progress thread. A blocking call returns once op has finished.
  void submit(const std::shared_ptr<Operation>& op, bool async);
  // A blocking call's fast path: if nothing is queued or in flight and take(forced) agrees (forced:
  // the row WEFT_ALGO / weftCommSetAlgorithm forces for a call of kind and bytes, or nullptr),
  // numbers the call and runs fn(seq, record, forced) on the caller's thread, returning true once
  // it returned; otherwise returns false at once, having numbered nothing. fn must not throw.
  template <class Take, class Fn>
  bool run_inline(CollectiveKind kind, uint64_t bytes, Take&& take, Fn&& fn) {
    std::unique_lock<std::mutex> q(mu_);
    if (inline_ || busy_ || !queue_.empty()) return false;
    const Algorithm* forced = spec_.empty() ? nullptr : spec_.resolve(kind, bytes);
    if (!take(forced)) return false;
    const uint64_t seq = next_seq_++;
    const uint64_t record = next_record_++;
    inline_ = true;
    q.unlock();
    fn(seq, record, forced);
    q.lock();
    inline_ = false;
    q.unlock();
    cv_.notify_all();  // the progress thread (queued meanwhile) or wait_idle()
    return true;
  }
  // The rows forced for the operations submitted from now on (AlgorithmSpec: by collective and
  // size; each operation is stamped with its row, or none: automatic).
  void set_algorithm(AlgorithmSpec spec);
  std::string algorithm();  // the spec's text
  // Operations handed to the progress thread are recorded here as queued (nullptr: none).
  void set_recorder(FlightRecorder* recorder) { recorder_ = recorder; }
  // Returns once nothing is queued or in flight.
  void wait_idle();
  // Runs what is queued and in flight to its end, then ends the progress thread.
  void stop();

 private:
  void number(Operation& w);       // everything but receives, at submission
  void number_recv(Operation& w);  // receives, when they start (a receive from any source once matched)
  // Starts the held receives that can start: in order, each receive from any source once a
  // message for it has arrived (later receives wait behind it: MPI's order); true when one started.
  bool start_held();
  void start(const std::shared_ptr<Operation>& w);
  void loop();
  // One round over the operations in flight: poll, advance each, drop the finished; true when
  // anything moved.
  bool drive();

  const int rank_;
  Engine engine_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Operation>> queue_;
  bool inline_ = false;  // a blocking call runs on its caller's thread
  bool busy_ = false;    // the progress thread has operations started or in flight
  bool stopping_ = false;
  std::thread thread_;
  AlgorithmSpec spec_;
  uint64_t next_seq_ = 0;
  uint64_t next_record_ = 0;
  FlightRecorder* recorder_ = nullptr;
  std::vector<uint16_t> p2p_send_seq_, p2p_recv_seq_;  // per peer
  // The progress thread's own.
  std::vector<std::unique_ptr<InFlight>> active_;
  std::deque<std::shared_ptr<Operation>> held_;  // receives behind a receive from any source
  std::chrono::steady_clock::time_point held_since_{};
  std::function<bool()> drive_fn_;
  Waiter waiter_;
};

}  // namespace weft
