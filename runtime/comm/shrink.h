// weftCommShrink: the survivors of a communicator agree on who they are and build a new
// communicator of them. Communicator::shrink (shrink.cc) drives one ShrinkRound after another;
// each round works through the old communicator's store, under "shrink<attempt>/":
//
//   1. join      every survivor arms a death notice ("died") and writes "j/<rank>": the ranks it
//                excludes (explicit) or the ranks it saw fail (NULL);
//   2. decide    any survivor whose view is complete (every rank joined or known gone, or the
//                explicit lists disagree, or the deadline passed) proposes a decision, "decision":
//                the members or an error. set_if_absent lets the first proposal win, so every
//                survivor adopts the same one, whatever it noticed first;
//   3. create    the members build the new communicator under "<old prefix>s<attempt>/"; every
//                store operation they make meanwhile also watches the round (RoundWatchStore), so
//                a member that dies here ends the round on every rank instead of a timeout;
//   4. commit    each member adds 1 to "committed"; the first rank to see every member's (or a
//                member's death, or the deadline) proposes the round's "outcome", again first
//                writer wins: ok, failed because a member died (NULL mode tries again without it),
//                or an error.
// The store is the arbiter: what it holds decides, so the survivors never disagree on a group.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/store/store.h"

namespace weft {

// Checks an exclusion list on this rank, before anything is sent: every entry a rank of the
// communicator, none twice, not this rank. Throws Error(kInvalidArgument) naming fn and the entry.
void check_exclusion(const char* fn, const std::vector<int>& exclude, int rank, int size);

// A store and the key prefix it stands for: the base store under a chain of PrefixStores (and
// round watches) flattened, so that a communicator shrunk 20 times holds one PrefixStore, not 20.
std::pair<std::shared_ptr<Store>, std::string> flatten_store(const std::shared_ptr<Store>& store);

// How a round ended.
struct ShrinkOutcome {
  bool ok = false;
  bool member_died = false;  // failed because a member died during it: another round may succeed
  ErrorCode code = ErrorCode::kSuccess;
  std::string message;
};

class ShrinkRound {
 public:
  // store: the old communicator's. attempt numbers the rounds of one communicator (every
  // survivor counts them alike: a round fails on all of them or on none).
  ShrinkRound(std::shared_ptr<Store> store, int rank, int size, int attempt, std::chrono::steady_clock::time_point deadline);
  ~ShrinkRound();
  ShrinkRound(const ShrinkRound&) = delete;
  ShrinkRound& operator=(const ShrinkRound&) = delete;

  // Steps 1-2: joins and returns the decided members (old ranks, ascending). exclude: the
  // explicit list (nullopt: the failed ranks, agreed); failed_here: the ranks this rank saw fail.
  // Throws the decided error, or kRemoteError when the survivors excluded this rank.
  std::vector<int> decide(const std::optional<std::vector<int>>& exclude, const std::vector<int>& failed_here);
  // Step 3: the store of the new communicator, watching this round until disarm_watch().
  std::shared_ptr<Store> child_store();
  // This rank could not create its part of the new communicator: the round fails on every rank.
  void fail(const Error& e);
  // Step 4: commits (when created) and returns the outcome every member adopts.
  ShrinkOutcome commit(bool created);
  void disarm_watch();
  int attempt() const { return attempt_; }

  // The round's checks while the members create the new communicator (RoundWatchStore): throws
  // when the round has an outcome other than ok, a member died or the deadline passed.
  void check_during_creation();

 private:
  std::string round_key(const std::string& k) const;
  // The decision or outcome that landed: value if this call's proposal won.
  std::string propose(const std::string& key, const std::string& value);
  // The first member whose marker says it died, or -1.
  int dead_member();
  ShrinkOutcome parse_outcome(const std::string& o) const;

  std::shared_ptr<Store> store_;  // the old communicator's
  int rank_, size_, attempt_;
  std::chrono::steady_clock::time_point deadline_;
  std::vector<int> members_;
  bool notice_armed_ = false;
  std::mutex watch_mu_;
  std::chrono::steady_clock::time_point last_watch_{};
  std::shared_ptr<class RoundWatchStore> child_store_;
};

}  // namespace weft
