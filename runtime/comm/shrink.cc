// weftCommShrink: the agreement (ShrinkRound, see shrink.h) and Communicator::shrink.
#include "runtime/comm/shrink.h"

#include <unistd.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <thread>

#include "runtime/base/log.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/failure_watch.h"
#include "runtime/comm/membership.h"
#include "runtime/transport/inproc/inproc_transport.h"

namespace weft {

using Clock = std::chrono::steady_clock;

namespace {

std::string list_text(const std::vector<int>& v) {
  std::string s;
  for (int r : v) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return "{" + s + "}";
}

std::string ranks_text(const std::vector<int>& v) {
  std::string s;
  for (int r : v) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return (v.size() == 1 ? "rank " : "ranks ") + s;
}

// "<letter> 1 2 3" <-> {1, 2, 3}
std::string record(char mode, const std::vector<int>& ranks) {
  std::string s(1, mode);
  for (int r : ranks) s += " " + std::to_string(r);
  return s;
}
std::vector<int> record_ranks(const std::string& rec) {
  std::vector<int> out;
  std::istringstream in(rec.size() > 1 ? rec.substr(1) : std::string());
  for (int r; in >> r;) out.push_back(r);
  return out;
}

// Decisions and outcomes that are errors: "E<code> <message>" (or "D<code> ..." for a member's
// death during the round).
std::string error_record(char letter, ErrorCode code, const std::string& message) {
  return fmt::format("{}{} {}", letter, static_cast<int>(code), message);
}
std::pair<ErrorCode, std::string> parse_error_record(const std::string& rec) {
  const size_t sp = rec.find(' ');
  int code = static_cast<int>(ErrorCode::kInternalError);
  try {
    code = std::stoi(rec.substr(1, sp == std::string::npos ? std::string::npos : sp - 1));
  } catch (const std::exception&) {
  }
  return {static_cast<ErrorCode>(code), sp == std::string::npos ? rec : rec.substr(sp + 1)};
}

}  // namespace

// The new communicator's store during a round: forwards everything to its prefix of the base
// store, and while armed first asks the round whether it is still on (at most every 10 ms), so a
// member that dies while the others build the communicator (waiting in the store for its node
// record, its UCX address, its mapping of a segment) ends the round on every member at once.
// Waits are cut into 20 ms slices for the same reason.
class RoundWatchStore : public Store {
 public:
  RoundWatchStore(std::shared_ptr<Store> inner, ShrinkRound* round) : inner_(std::move(inner)), round_(round) {}
  const std::shared_ptr<Store>& inner() const { return inner_; }
  void disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    round_ = nullptr;
  }

  void set(const std::string& key, const Bytes& value) override {
    watch();
    inner_->set(key, value);
  }
  Bytes get(const std::string& key, Millis timeout) override {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      if (!watch()) return inner_->get(key, std::max(Millis(0), std::chrono::duration_cast<Millis>(deadline - Clock::now())));
      const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
      try {
        return inner_->get(key, std::clamp(left, Millis(0), Millis(20)));
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kTimeout) throw;
        if (Clock::now() >= deadline)
          fail(ErrorCode::kTimeout, "store: timed out after {} ms waiting for key '{}'", timeout.count(), key);
      }
    }
  }
  void wait(const std::vector<std::string>& keys, Millis timeout) override {
    const auto deadline = Clock::now() + timeout;
    for (const auto& k : keys) get(k, std::max(Millis(0), std::chrono::duration_cast<Millis>(deadline - Clock::now())));
  }
  int64_t add(const std::string& key, int64_t delta) override {
    watch();
    return inner_->add(key, delta);
  }
  bool check(const std::string& key) override {
    watch();
    return inner_->check(key);
  }
  void erase(const std::string& key) override {
    watch();
    inner_->erase(key);
  }
  Bytes set_if_absent(const std::string& key, const Bytes& value) override {
    watch();
    return inner_->set_if_absent(key, value);
  }
  void set_on_disconnect(const std::string& key, const Bytes& value) override { inner_->set_on_disconnect(key, value); }
  void cancel_on_disconnect(const std::string& key) override { inner_->cancel_on_disconnect(key); }

 private:
  // Throws when the round is over without success; false once disarmed.
  bool watch() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!round_) return false;
    round_->check_during_creation();
    return true;
  }
  std::shared_ptr<Store> inner_;
  std::mutex mu_;
  ShrinkRound* round_;
};

void check_exclusion(const char* fn, const std::vector<int>& exclude, int rank, int size) {
  std::set<int> seen;
  for (size_t i = 0; i < exclude.size(); ++i) {
    const int r = exclude[i];
    if (r < 0 || r >= size)
      fail(ErrorCode::kInvalidArgument, "{}: excludeRanks[{}] = {} is not a rank of the communicator (0..{})", fn, i, r, size - 1);
    if (!seen.insert(r).second) fail(ErrorCode::kInvalidArgument, "{}: excludeRanks[{}] = {} appears twice", fn, i, r);
    if (r == rank)
      fail(ErrorCode::kInvalidArgument,
           "{}: excludeRanks[{}] = {} is this rank: a rank that calls {} survives (an excluded rank must not call it)", fn, i,
           r, fn);
  }
}

std::pair<std::shared_ptr<Store>, std::string> flatten_store(const std::shared_ptr<Store>& store) {
  if (auto* w = dynamic_cast<RoundWatchStore*>(store.get())) return flatten_store(w->inner());
  if (auto* p = dynamic_cast<PrefixStore*>(store.get())) {
    auto [base, prefix] = flatten_store(p->base());
    return {base, prefix + p->prefix()};
  }
  return {store, ""};
}

// ---- ShrinkRound ----------------------------------------------------------------------------

ShrinkRound::ShrinkRound(std::shared_ptr<Store> store, int rank, int size, int attempt, Clock::time_point deadline)
    : store_(std::move(store)), rank_(rank), size_(size), attempt_(attempt), deadline_(deadline) {}

ShrinkRound::~ShrinkRound() {
  disarm_watch();
  if (!notice_armed_) return;
  try {
    store_->cancel_on_disconnect(round_key("died"));
  } catch (const std::exception& e) {
    WEFT_LOG_DEBUG("weftCommShrink: cancel the round's death notice: {}", e.what());
  }
}

std::string ShrinkRound::round_key(const std::string& k) const { return fmt::format("shrink{}/{}", attempt_, k); }

std::string ShrinkRound::propose(const std::string& key, const std::string& value) {
  return to_string(store_->set_if_absent(round_key(key), to_bytes(value)));
}

std::vector<int> ShrinkRound::decide(const std::optional<std::vector<int>>& exclude, const std::vector<int>& failed_here) {
  const bool explicit_list = exclude.has_value();
  std::vector<int> mine = explicit_list ? *exclude : failed_here;
  std::sort(mine.begin(), mine.end());
  mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
  const std::string my_record = record(explicit_list ? 'X' : 'N', mine);
  store_->set_on_disconnect(round_key("died"),
                            to_bytes(fmt::format("rank {} (pid {} on {}) died during weftCommShrink", rank_, getpid(), host_name())));
  notice_armed_ = true;
  store_->set(round_key(fmt::format("j/{}", rank_)), to_bytes(my_record));

  std::vector<std::string> records(size_);  // "" = not joined (yet)
  std::vector<FailureWatch::Gone> gone(size_, FailureWatch::Gone::kNone);
  records[rank_] = my_record;
  auto describe = [](const std::string& rec) {
    return rec[0] == 'X' ? "excludeRanks " + list_text(record_ranks(rec)) : std::string("NULL (the ranks that failed)");
  };
  std::string decision;
  auto backoff = std::chrono::microseconds(100);
  for (;;) {
    if (store_->check(round_key("decision"))) {
      decision = to_string(store_->get(round_key("decision"), std::chrono::milliseconds(1000)));
      break;
    }
    bool progress = false;
    for (int r = 0; r < size_; ++r) {
      if (!records[r].empty()) continue;
      const std::string jk = round_key(fmt::format("j/{}", r));
      if (store_->check(jk)) {
        records[r] = to_string(store_->get(jk, std::chrono::milliseconds(1000)));
        progress = true;
      } else if (gone[r] == FailureWatch::Gone::kNone && store_->check(FailureWatch::gone_key(r))) {
        gone[r] = FailureWatch::gone_of(store_->get(FailureWatch::gone_key(r), std::chrono::milliseconds(1000)));
        progress = gone[r] != FailureWatch::Gone::kNone;
      }
    }
    // What this rank's view decides, if it is complete.
    std::string proposal;
    std::vector<int> missing;  // ranks whose part is still unknown
    if (explicit_list) {
      for (int r = 0; r < size_ && proposal.empty(); ++r) {
        const bool excluded = std::binary_search(mine.begin(), mine.end(), r);
        if (!records[r].empty() && excluded) {
          proposal = error_record('E', ErrorCode::kInvalidUsage,
                                  fmt::format("weftCommShrink: rank {} is in excludeRanks {} of rank {} but called weftCommShrink "
                                              "itself (the ranks must pass the same excludeRanks)", r, list_text(mine), rank_));
        } else if (!records[r].empty() && records[r] != my_record) {
          proposal = error_record('E', ErrorCode::kInvalidUsage,
                                  fmt::format("weftCommShrink: the ranks passed different arguments: rank {} {}, rank {} {}", rank_,
                                              describe(my_record), r, describe(records[r])));
        } else if (records[r].empty() && !excluded && gone[r] != FailureWatch::Gone::kNone) {
          proposal = error_record('E', ErrorCode::kRemoteError,
                                  fmt::format("weftCommShrink: rank {}, which excludeRanks {} keeps, {} before it joined the shrink; "
                                              "exclude it too (or pass NULL: the ranks that failed)", r, list_text(mine),
                                              gone[r] == FailureWatch::Gone::kDied ? "died" : "destroyed the communicator"));
        } else if (records[r].empty() && !excluded) {
          missing.push_back(r);
        }
      }
      if (proposal.empty() && missing.empty()) {
        std::vector<int> members;
        for (int r = 0; r < size_; ++r)
          if (!std::binary_search(mine.begin(), mine.end(), r)) members.push_back(r);
        proposal = record('M', members);
      }
    } else {
      std::set<int> failed(mine.begin(), mine.end());
      for (int r = 0; r < size_ && proposal.empty(); ++r) {
        if (gone[r] != FailureWatch::Gone::kNone) failed.insert(r);
        if (records[r].empty()) continue;
        if (records[r][0] != 'N') {
          proposal = error_record('E', ErrorCode::kInvalidUsage,
                                  fmt::format("weftCommShrink: the ranks passed different arguments: rank {} {}, rank {} {}", rank_,
                                              describe(my_record), r, describe(records[r])));
        }
        for (int f : record_ranks(records[r])) failed.insert(f);
      }
      std::vector<int> members;
      for (int r = 0; r < size_; ++r) {
        if (records[r].empty() && !failed.count(r)) missing.push_back(r);
        if (!records[r].empty() && !failed.count(r)) members.push_back(r);
      }
      if (proposal.empty() && missing.empty()) {
        proposal = members.empty() ? error_record('E', ErrorCode::kRemoteError,
                                                  "weftCommShrink: every rank that joined the shrink was seen to fail by another")
                                   : record('M', members);
      }
    }
    if (proposal.empty() && Clock::now() > deadline_) {
      proposal = error_record(
          'E', ErrorCode::kTimeout,
          fmt::format("weftCommShrink: timed out: {} neither joined the shrink nor {} known to have failed; {}", ranks_text(missing),
                      missing.size() == 1 ? "is" : "are",
                      explicit_list ? "add them to excludeRanks" : "pass them in excludeRanks if they are hung"));
    }
    if (!proposal.empty()) {
      decision = propose("decision", proposal);
      break;
    }
    std::this_thread::sleep_for(backoff);
    backoff = progress ? std::chrono::microseconds(100) : std::min(backoff * 2, std::chrono::microseconds(5000));
  }
  if (decision.empty() || decision[0] != 'M') {
    auto [code, message] = parse_error_record(decision);
    throw Error(code, message);
  }
  members_ = record_ranks(decision);
  if (!std::binary_search(members_.begin(), members_.end(), rank_)) {
    weft::fail(ErrorCode::kRemoteError,
         "weftCommShrink: the survivors {} excluded this rank ({}): another rank saw it fail; it is not part of the new "
         "communicator", list_text(members_), rank_);
  }
  return members_;
}

std::shared_ptr<Store> ShrinkRound::child_store() {
  auto [base, prefix] = flatten_store(store_);
  child_store_ = std::make_shared<RoundWatchStore>(std::make_shared<PrefixStore>(base, fmt::format("{}s{}", prefix, attempt_)), this);
  return child_store_;
}

void ShrinkRound::disarm_watch() {
  if (child_store_) child_store_->disarm();
  child_store_.reset();
}

int ShrinkRound::dead_member() {
  for (int m : members_) {
    if (m == rank_ || !store_->check(FailureWatch::gone_key(m))) continue;
    if (FailureWatch::gone_of(store_->get(FailureWatch::gone_key(m), std::chrono::milliseconds(1000))) == FailureWatch::Gone::kDied)
      return m;
  }
  return -1;
}

ShrinkOutcome ShrinkRound::parse_outcome(const std::string& o) const {
  ShrinkOutcome out;
  if (o == "ok") {
    out.ok = true;
    return out;
  }
  out.member_died = !o.empty() && o[0] == 'D';
  std::tie(out.code, out.message) = parse_error_record(o);
  return out;
}

void ShrinkRound::check_during_creation() {
  const auto now = Clock::now();
  if (now - last_watch_ < std::chrono::milliseconds(10)) return;
  last_watch_ = now;
  std::string outcome;
  if (store_->check(round_key("outcome"))) {
    outcome = to_string(store_->get(round_key("outcome"), std::chrono::milliseconds(1000)));
  } else if (int m = store_->check(round_key("died")) ? dead_member() : -1; m >= 0) {
    outcome = propose("outcome", error_record('D', ErrorCode::kRemoteError,
                                              fmt::format("weftCommShrink: rank {} died while the survivors built the new communicator",
                                                          m)));
  } else if (now > deadline_) {
    outcome = propose("outcome", error_record('E', ErrorCode::kTimeout, "weftCommShrink: the new communicator was not built in time"));
  }
  if (outcome.empty()) return;
  ShrinkOutcome o = parse_outcome(outcome);
  if (!o.ok) throw Error(o.code, o.message);
}

void ShrinkRound::fail(const Error& e) {
  propose("outcome", error_record('E', e.code(), fmt::format("weftCommShrink: rank {} could not build its part of the new "
                                                             "communicator: {}", rank_, e.what())));
}

ShrinkOutcome ShrinkRound::commit(bool created) {
  if (created) store_->add(round_key("committed"), 1);
  auto backoff = std::chrono::microseconds(100);
  for (;;) {
    if (store_->check(round_key("outcome")))
      return parse_outcome(to_string(store_->get(round_key("outcome"), std::chrono::milliseconds(1000))));
    std::string proposal;
    if (created && store_->add(round_key("committed"), 0) >= static_cast<int64_t>(members_.size())) {
      proposal = "ok";
    } else if (int m = store_->check(round_key("died")) ? dead_member() : -1; m >= 0) {
      proposal = error_record('D', ErrorCode::kRemoteError,
                              fmt::format("weftCommShrink: rank {} died before the new communicator was complete", m));
    } else if (Clock::now() > deadline_) {
      proposal = error_record('E', ErrorCode::kTimeout, "weftCommShrink: not every member finished building the new communicator in time");
    }
    if (!proposal.empty()) return parse_outcome(propose("outcome", proposal));
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::microseconds(5000));
  }
}

// ---- Communicator ----------------------------------------------------------------------------

std::vector<int> Communicator::local_failures() const {
  std::vector<int> out;
  if (!transport_) return out;
  for (int r = 0; r < size(); ++r)
    if (r != rank() && !transport_->peer_failure(r).empty()) out.push_back(r);
  return out;
}

std::vector<int> Communicator::failed_ranks() {
  {
    std::lock_guard<std::mutex> lock(destroy_mu_);
    if (destroyed_) fail(ErrorCode::kInvalidUsage, "weftCommGetFailedRanks: the communicator was destroyed");
  }
  return failures_.died_ranks(local_failures());
}

std::shared_ptr<Communicator> Communicator::make_shrunk(const std::vector<int>& members, std::shared_ptr<Store> store) {
  CommInit ci;
  ci.store = std::move(store);
  ci.rank = static_cast<int>(std::lower_bound(members.begin(), members.end(), rank()) - members.begin());
  ci.size = static_cast<int>(members.size());
  ci.transport = init_.transport;
  ci.node_id = init_.node_id;
  ci.config = config_;
  ci.config.algo = queue_->algorithm();
  ci.keep_alive = init_.keep_alive;  // the store server, when this process serves it
  if (init_.transport == TransportKind::kInproc) ci.fabric = inproc_fabric_for(*ci.store, ci.rank, ci.size, config_.timeout);
  auto child = Communicator::create(std::move(ci));
  child->shrunk_from_ = members;
  return child;
}

void Communicator::retire() {
  shrunk_.store(true, std::memory_order_release);
  release();
}

std::shared_ptr<Communicator> Communicator::shrink(const std::optional<std::vector<int>>& exclude) {
  std::lock_guard<std::mutex> one_at_a_time(shrink_mu_);
  {
    std::lock_guard<std::mutex> lock(destroy_mu_);
    if (destroyed_) fail(ErrorCode::kInvalidUsage, "weftCommShrink: the communicator was destroyed");
  }
  if (shrunk_.load()) {
    fail(ErrorCode::kInvalidUsage, "weftCommShrink: the communicator was already shrunk: shrink the new one (this one can only be destroyed)");
  }
  if (exclude) check_exclusion("weftCommShrink", *exclude, rank(), size());
  // A healthy communicator finishes what was queued first (a broken one fails it at once).
  queue_->wait_idle();
  const auto t0 = Clock::now();
  const auto deadline = t0 + config_.timeout;
  for (;;) {
    ShrinkRound round(store_, rank(), size(), shrink_attempts_++, deadline);
    std::vector<int> members;
    try {
      members = round.decide(exclude, local_failures());
    } catch (const Error& e) {
      if (std::string(e.what()).rfind("store at ", 0) != 0) throw;
      fail(e.code(), "weftCommShrink needs the job's store, which is unreachable: {} (if a rank served it, it went with that "
           "rank: run under weftrun, which serves the store outside the ranks; docs/LAUNCHING.md)", e.what());
    }
    std::shared_ptr<Communicator> child;
    try {
      child = make_shrunk(members, round.child_store());
    } catch (const Error& e) {
      round.fail(e);
    } catch (const std::exception& e) {
      round.fail(Error(ErrorCode::kInternalError, e.what()));
    }
    const ShrinkOutcome outcome = round.commit(child != nullptr);
    round.disarm_watch();
    if (outcome.ok) {
      // The new communicator takes over what the job's first one held: the store's lifetime
      // handshake and MPI_Finalize.
      child->init_.world = init_.world;
      child->init_.on_destroy = std::move(init_.on_destroy);
      init_.world = false;
      init_.on_destroy = nullptr;
      retire();
      WEFT_LOG_INFO("weftCommShrink: rank {} of {} -> rank {} of {} (round {}, {:.1f} ms)", rank(), size(), child->rank(),
                    child->size(), round.attempt(), std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      return child;
    }
    if (child) child->destroy();
    if (outcome.member_died && !exclude) {
      WEFT_LOG_WARN("{}; trying again without it", outcome.message);
      continue;
    }
    throw Error(outcome.code, outcome.message);
  }
}

}  // namespace weft
