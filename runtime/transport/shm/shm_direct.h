// ShmDirect: the latency path for small collectives among the ranks of one node (Open MPI's
// xhc / DeepSpeed's shared-memory all-reduce in spirit). One segment per communicator holds, per
// rank, two flag cache lines and two data slots (one of each per call parity). A call numbered c: the rank waits until every peer
// has posted c-1 (so they are done reading its slot from call c-2), copies its input into slot
// c%2 (up to 40 bytes: into its flag's cache line for that parity), posts c in its flag (with the call's signature and size), then waits for the peers it needs
// and reads their slots straight into its output: an all-reduce reduces every slot in rank order
// (the same bits on every rank), an all-gather copies them, a broadcast copies the root's. No
// messages, no reduce-scatter/all-gather rounds, no trailing barrier, no syscall on the fast path:
// the calling thread polls (spin, then sched_yield, then a futex the poster wakes).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "collectives/collective.h"
#include "runtime/base/bytes.h"
#include "runtime/base/wait_note.h"

namespace weft {

class Store;
class Transport;

struct DirectContext {
  // The call's start as far as waiting goes: set by the caller, or (left zero) by the first wait
  // that finds a peer not there yet, so a call whose peers are all there reads no clock at all.
  // The call fails with kTimeout once it has waited `timeout` since then.
  mutable std::chrono::steady_clock::time_point start{};
  std::chrono::milliseconds timeout{0};
  const std::atomic<bool>* abort = nullptr;
  std::function<void()> watchdog;          // every ~100 ms while waiting (remote failures, mismatches)
  std::function<std::string()> describe;   // the call, for errors
  uint16_t signature = 0;                  // call_signature(args)
  Transport* transport = nullptr;          // asked (every ~5 ms) whether a peer died
  WaitNote* wait = nullptr;                // noted once a wait outlasts the spin (flight recorder)
  std::atomic<int64_t>* record_start = nullptr;  // given `start` when the first wait sets it (flight recorder)
};

class ShmDirect {
 public:
  // Collective over the communicator's ranks, all on this node. slot_bytes: the largest per-rank
  // contribution the path takes in one round. piece_bytes > 0: all-reduces of any larger size
  // too, in pieces of piece_bytes, each in two rounds (every rank reduces its share of the piece
  // from all slots, then copies the others' reduced shares). oversubscribed: more ranks than
  // cores, so waiters yield at once.
  ShmDirect(Store& store, int rank, int size, uint64_t slot_bytes, uint64_t piece_bytes, bool oversubscribed,
            std::chrono::microseconds spin, Millis timeout);
  ~ShmDirect();
  ShmDirect(const ShmDirect&) = delete;
  ShmDirect& operator=(const ShmDirect&) = delete;

  // Whether this path runs `a` (kind and size; the same answer on every rank for the same call).
  bool handles(const CollectiveArgs& a) const;
  void run(const CollectiveArgs& a, const void* send, void* recv, const DirectContext& ctx);
  uint64_t calls() const { return calls_; }  // calls run here (tests check the path was taken)

 private:
  struct Flag;
  Flag* flag(int r, uint32_t c) const;  // rank r's line for calls of c's parity
  // Where rank r's contribution of `bytes` to call c lies: in its flag's line when small.
  uint8_t* slot(int r, uint32_t c, uint64_t bytes) const;
  void post(uint32_t c, uint64_t bytes, const DirectContext& ctx);
  // Waits until rank r has posted at least c; with check, compares its call signature (and its
  // size, unless kAnyBytes) with this rank's.
  static constexpr uint64_t kAnyBytes = ~uint64_t{0};
  void wait_for(int r, uint32_t c, const DirectContext& ctx, bool check, uint64_t expect_bytes = kAnyBytes);
  // All-reduce in pieces of piece_bytes_, each as two calls: publish the piece, reduce this rank's
  // share of it from every slot, publish the share, gather the others' shares.
  void all_reduce_pieces(const CollectiveArgs& a, const void* send, void* recv, const DirectContext& ctx);

  int rank_, size_;
  uint64_t one_round_bytes_;  // the largest call taken in one round
  uint64_t piece_bytes_;      // 0: no larger all-reduces
  uint64_t allreduce_round_bytes_;  // the largest all-reduce taken in one round (above: in pieces)
  uint64_t slot_bytes_;       // max of the two
  bool oversubscribed_;
  bool light_posts_ = false;   // post with a plain store (the sleepers fence for both: AsymmetricFence)
  bool heavy_sleeps_ = false;  // sleepers fence for light posters
  std::chrono::microseconds spin_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  uint32_t next_ = 1;  // the number of the next call
  uint64_t calls_ = 0;
};

}  // namespace weft
