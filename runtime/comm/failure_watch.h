// FailureWatch: a communicator's broken state and what its ranks tell each other about failures.
// The first cause is published under the store key "abort" (and a rank's death by the store
// server, from the notice armed at start); every waiting rank reads it within ~100 ms. Each rank
// also has its own marker, "gone/<rank>": set by the store server when the rank dies ("died: ..."),
// by the rank itself when it destroys the communicator ("left"), so that the survivors of a
// weftCommShrink know which ranks will never join it.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/base/bytes.h"
#include "runtime/base/error.h"

namespace weft {

class Store;

class FailureWatch {
 public:
  FailureWatch(std::shared_ptr<Store> store, int rank, int size);
  // If this process dies, the store server publishes its death (cancelled by disarm(), which
  // marks the rank as having left).
  void arm_death_notice();
  void disarm_death_notice();

  // The key of rank r's marker, and what it says: kNone, or the rank died or left.
  static std::string gone_key(int rank);
  enum class Gone { kNone, kDied, kLeft };
  static Gone gone_of(const Bytes& marker);
  // The ranks whose marker says they died (asks the store once per rank), plus `also`.
  std::vector<int> died_ranks(const std::vector<int>& also = {}) const;

  bool broken() const { return broken_flag_.load(std::memory_order_acquire); }  // lock-free, every call asks
  std::string broken_reason() const;  // "" when healthy
  std::string last_error() const;
  void set_last_error(const std::string& e);
  // weftCommAbort: fails what runs (executor polls this flag) and breaks the communicator.
  const std::atomic<bool>& abort_flag() const { return abort_; }
  bool aborted() const { return abort_.load(); }
  void abort(const std::string& why);

  // Breaks the communicator (first cause wins); tell_others publishes the cause.
  void mark_broken(const std::string& why, bool tell_others);
  // Throws kRemoteError when another rank published a failure. Asks the store at most every
  // 100 ms for the whole communicator (every operation in flight calls it, and across nodes each
  // ask is a network round trip: 64 in flight asked 64 in turn); once seen, every later call throws.
  void check_remote_abort();
  // The executor's watchdog for call `seq` with `signature`, started at t0: remote failures, and
  // after 1 s a comparison of call signatures with the next rank (a mismatch no receive can see,
  // e.g. different roots, would otherwise end as a timeout). Lives on the caller's stack for the
  // call; costs nothing until the watchdog first runs; the destructor withdraws what it published.
  class SignatureCheck {
   public:
    SignatureCheck(FailureWatch& watch, uint64_t seq, uint16_t signature, bool collective,
                   std::chrono::steady_clock::time_point t0)
        : w_(watch), seq_(seq), signature_(signature), collective_(collective && watch.size_ > 1), t0_(t0) {}
    ~SignatureCheck();
    SignatureCheck(const SignatureCheck&) = delete;
    SignatureCheck& operator=(const SignatureCheck&) = delete;
    void operator()();  // the watchdog: throws on a remote failure or a mismatch

   private:
    std::string key(int rank) const;
    FailureWatch& w_;
    uint64_t seq_;
    uint16_t signature_;
    bool collective_;
    bool published_ = false;
    std::chrono::steady_clock::time_point t0_;
  };
  // An operation failed with e: returns the code and message to report, breaking the
  // communicator unless e is a bad argument (nothing in flight then), and publishing the cause
  // unless it came from another rank. `call` describes the call ("allreduce #3 (...)").
  std::pair<ErrorCode, std::string> on_failure(const Error& e, const std::string& call);

 private:
  std::shared_ptr<Store> store_;
  int rank_, size_;
  std::atomic<bool> abort_{false};
  std::atomic<int64_t> next_abort_check_ns_{0};  // steady clock
  std::string remote_abort_;                    // the published cause, once seen (under mu_)
  mutable std::mutex mu_;
  std::string broken_;  // non-empty: why the communicator is broken
  std::atomic<bool> broken_flag_{false};
  std::string last_error_;
};

}  // namespace weft
