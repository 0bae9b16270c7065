#include "runtime/comm/failure_watch.h"

#include <unistd.h>

#include <algorithm>

#include "collectives/collective.h"
#include "runtime/base/log.h"
#include "runtime/comm/membership.h"
#include "runtime/store/store.h"

namespace weft {

using Clock = std::chrono::steady_clock;

FailureWatch::FailureWatch(std::shared_ptr<Store> store, int rank, int size) : store_(std::move(store)), rank_(rank), size_(size) {}

void FailureWatch::arm_death_notice() {
  const std::string who = fmt::format("rank {} (pid {} on {}) died", rank_, getpid(), host_name());
  store_->set_on_disconnect("abort", to_bytes(who + ": its connection to the store closed while the communicator was in use"));
  store_->set_on_disconnect(gone_key(rank_), to_bytes("died: " + who));
}

void FailureWatch::disarm_death_notice() {
  try {
    store_->cancel_on_disconnect("abort");
    store_->cancel_on_disconnect(gone_key(rank_));
    store_->set(gone_key(rank_), to_bytes("left"));
  } catch (const std::exception& e) {
    WEFT_LOG_DEBUG("cancel disconnect notice: {}", e.what());
  }
}

std::string FailureWatch::gone_key(int rank) { return fmt::format("gone/{}", rank); }

FailureWatch::Gone FailureWatch::gone_of(const Bytes& marker) {
  const std::string m = to_string(marker);
  return m.rfind("died", 0) == 0 ? Gone::kDied : m == "left" ? Gone::kLeft : Gone::kNone;
}

std::vector<int> FailureWatch::died_ranks(const std::vector<int>& also) const {
  std::vector<int> out;
  for (int r = 0; r < size_; ++r) {
    bool died = std::find(also.begin(), also.end(), r) != also.end();
    if (!died && r != rank_ && store_->check(gone_key(r)))
      died = gone_of(store_->get(gone_key(r), std::chrono::milliseconds(1000))) == Gone::kDied;
    if (died) out.push_back(r);
  }
  return out;
}

std::string FailureWatch::broken_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}
std::string FailureWatch::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}
void FailureWatch::set_last_error(const std::string& e) {
  std::lock_guard<std::mutex> lock(mu_);
  last_error_ = e;
}

void FailureWatch::abort(const std::string& why) {
  abort_.store(true);
  mark_broken(why, true);
}

void FailureWatch::mark_broken(const std::string& why, bool tell_others) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.empty()) return;
    broken_ = why;
    broken_flag_.store(true, std::memory_order_release);
  }
  WEFT_LOG_ERROR("communicator broken: {}", why);
  if (!tell_others) return;
  try {
    // First cause wins: a failure that follows another rank's report does not replace it.
    if (!store_->check("abort")) store_->set("abort", to_bytes(fmt::format("rank {} failed: {}", rank_, why)));
    // The cause is published: this process's death notice must not overwrite it later.
    store_->cancel_on_disconnect("abort");
  } catch (const std::exception& e) {
    WEFT_LOG_DEBUG("could not publish the failure to the other ranks: {}", e.what());
  }
}

void FailureWatch::check_remote_abort() {
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  int64_t due = next_abort_check_ns_.load(std::memory_order_relaxed);
  const int64_t next = now + std::chrono::nanoseconds(std::chrono::milliseconds(100)).count();
  // One caller asks the store; the others until the next ask take the last answer.
  if (now >= due && next_abort_check_ns_.compare_exchange_strong(due, next, std::memory_order_relaxed) &&
      store_->check("abort")) {
    std::string why = to_string(store_->get("abort", std::chrono::milliseconds(1000)));
    std::lock_guard<std::mutex> lock(mu_);
    remote_abort_ = why;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!remote_abort_.empty()) throw Error(ErrorCode::kRemoteError, remote_abort_);
}

// Each rank publishes its call signature after 1 s of waiting and compares it with the next
// rank's: if the ranks differ anywhere, some neighbours differ.
std::string FailureWatch::SignatureCheck::key(int rank) const { return fmt::format("sig/{}/{}", seq_, rank); }

void FailureWatch::SignatureCheck::operator()() {
  w_.check_remote_abort();
  if (!collective_ || Clock::now() - t0_ < std::chrono::seconds(1)) return;
  if (!published_) {
    w_.store_->set(key(w_.rank_), to_bytes(std::to_string(signature_)));
    published_ = true;
  }
  const int next_rank = (w_.rank_ + 1) % w_.size_;
  const std::string next = key(next_rank);
  if (!w_.store_->check(next)) return;
  Bytes value;
  try {
    value = w_.store_->get(next, std::chrono::milliseconds(200));
  } catch (const Error& e) {
    // The next rank erased its key between check() and get(): it has finished this call.
    if (e.code() == ErrorCode::kTimeout) return;
    throw;
  }
  auto theirs = static_cast<uint16_t>(std::stoul(to_string(value)));
  if (theirs != signature_) {
    fail(ErrorCode::kInvalidUsage, "mismatch with rank {}: the ranks passed different arguments: {}", next_rank,
         signature_difference(signature_, theirs));
  }
}

FailureWatch::SignatureCheck::~SignatureCheck() {
  if (!published_) return;
  try {
    w_.store_->erase(key(w_.rank_));
  } catch (const std::exception& e) {
    WEFT_LOG_DEBUG("erase {}: {}", key(w_.rank_), e.what());
  }
}

std::pair<ErrorCode, std::string> FailureWatch::on_failure(const Error& e, const std::string& call) {
  std::string why = e.what();
  ErrorCode code = e.code();
  if (code != ErrorCode::kInvalidArgument) {
    // Another rank's failure published first is the cause, also of a transport error seen here
    // just after it (that rank, or one that saw it, tore down its endpoints): report it, as every
    // other rank does, and do not publish this one. A timeout or a mismatch found here is this
    // rank's own finding and stays as it is.
    bool told = false;
    if (!abort_.load() && code != ErrorCode::kTimeout && code != ErrorCode::kInvalidUsage) {
      try {
        if (store_->check("abort")) {
          const std::string first = to_string(store_->get("abort", std::chrono::milliseconds(1000)));
          told = true;
          code = ErrorCode::kRemoteError;
          if (why.find(first) == std::string::npos) {
            std::string here = why.rfind(call + ": ", 0) == 0 ? why.substr(call.size() + 2) : why;
            why = fmt::format("{}: {} (then here: {})", call, first, here);
          }
        }
      } catch (const std::exception& se) {
        WEFT_LOG_DEBUG("could not read the other ranks' failure: {}", se.what());
      }
    }
    mark_broken(why, !told && !abort_.load());
  }
  set_last_error(why);
  return {code, why};
}

}  // namespace weft
