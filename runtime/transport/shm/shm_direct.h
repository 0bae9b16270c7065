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
#include <mutex>
#include <string>
#include <vector>

#include "collectives/collective.h"
#include "runtime/base/bytes.h"
#include "runtime/base/wait_note.h"
#include "runtime/base/waiter.h"

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
  // The communicator's operations in flight (progress thread): driven while this call waits, so
  // that a peer waiting on one of them (a send still queued here) reaches this call. Empty: none.
  std::function<bool()> others;
  std::atomic<int64_t>* record_start = nullptr;  // given `start` when the first wait sets it (flight recorder)
  // Deterministic mode (docs/DETERMINISM.md): float16/bfloat16 sums fold in rank order in their own
  // type, as the deterministic schedules do, so that a call's bits do not depend on which path its
  // size takes (else: in float32, rounded once).
  bool fold16 = false;
};

class ShmDirect {
 public:
  // Collective over the communicator's ranks, all on this node. limits (direct_limits,
  // collectives/collective.h): the largest per-rank contribution taken in one round, and the
  // pieces of larger all-reduces (0: none), each in two rounds (every rank reduces its share of
  // the piece from all slots, then copies the others' reduced shares). oversubscribed: more ranks
  // than cores, so waiters yield at once. Which call runs where is the table's native rows'
  // eligibility (collectives/algorithms/direct.cc), not this class's.
  ShmDirect(Store& store, int rank, int size, const DirectLimits& limits, bool oversubscribed,
            std::chrono::microseconds spin, Millis timeout);
  ~ShmDirect();
  ShmDirect(const ShmDirect&) = delete;
  ShmDirect& operator=(const ShmDirect&) = delete;

  // One round ("direct" row): all-reduce, reduce, broadcast, all-gather, barrier.
  void run(const CollectiveArgs& a, const void* send, void* recv, const DirectContext& ctx);
  // All-reduce in pieces of the limits' piece bytes, each as two calls: publish the piece, reduce
  // this rank's share of it from every slot, publish the share, gather the others' shares
  // ("pieces" row).
  void all_reduce_pieces(const CollectiveArgs& a, const void* send, void* recv, const DirectContext& ctx);
  uint64_t calls() const { return calls_; }  // calls run here (tests check the path was taken)

  // Windows (weftMemAlloc; MPI_Win_allocate_shared in spirit). Collective: every rank
  // asks for the same `bytes` and gets its own region of one segment that every rank of the node
  // maps, so an all-reduce whose buffers are such regions on every rank reads the peers' buffers
  // and writes the results straight into them: no copy through slots, 2 bytes of memory traffic
  // per byte of buffer instead of 5-6 (docs/ARCHITECTURE.md, "Windows"). Throws weft::Error.
  void* alloc_window(Store& store, uint64_t bytes, Millis timeout);
  // Unmaps this rank's view of the segment that holds p (what alloc_window returned); the peers'
  // views stay valid until they free theirs. False if p is not such a pointer.
  bool free_window(void* p);
  // Hands over the mappings of the windows not yet freed (they outlive this path: tensors may
  // still view them after the communicator is destroyed); the caller unmaps them.
  struct Mapping {
    void* base;
    size_t bytes;
    void* mine;  // what alloc_window returned
  };
  std::vector<Mapping> take_windows();
  // How many windows this rank has allocated so far: the same on every rank between collective
  // calls, so the communicator stamps each operation with it when submitted.
  uint32_t windows_allocated() const { return windows_allocated_.load(std::memory_order_acquire); }
  // An all-reduce of any size over buffers that may be windows. One round tells every rank where
  // every rank's buffers are; when all are windows (and the calls match), each rank reduces its
  // 1/n share from every rank's send buffer, in rank order (the same bits as one round), writes it
  // into every rank's receive buffer and says so: two waits, no copies. Returns false, having
  // run nothing else, when some rank's buffers are not windows: every rank then returns false
  // and the dispatcher tries the next row ("window" row).
  bool all_reduce_window(const CollectiveArgs& a, const void* send, void* recv, const DirectContext& ctx);

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
  // wait_for's wait once the first polls found nothing (runtime/base/waiter.h), its checks, and
  // its sleep on the peer's flag.
  struct WaitPace {
    Every checks, watchdog;
    bool noted;  // the flight recorder knows whom this call waits for
  };
  void wait_slow(Flag* f, int r, uint32_t c, const DirectContext& ctx);
  void wait_checks(int r, const DirectContext& ctx, WaitPace& pace, std::chrono::steady_clock::time_point now) const;
  void sleep_on(Flag* f, uint32_t c, const DirectContext& ctx) const;

  struct Window {
    uint32_t id = 0;
    uint8_t* base = nullptr;  // the segment: rank r's region at base + r * stride
    uint64_t stride = 0;
    uint64_t bytes = 0;       // what each rank asked for
    size_t mapped = 0;        // the mapping's length
  };
  // The window holding [p, p + bytes) in this rank's region, or nullptr; off: p's offset in it.
  const Window* find_window(const void* p, uint64_t bytes, uint64_t& off) const;

  int rank_, size_;
  mutable std::mutex windows_mu_;
  std::vector<Window> windows_;
  std::atomic<uint32_t> windows_allocated_{0};
  uint32_t window_calls_ = 0;  // alloc_window calls: each one's store keys and window id
  std::vector<uint64_t> block_;  // the zero-copy all-reduce's staging block (in L1)
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
