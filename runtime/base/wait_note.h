// WaitNote: what a running operation waits on, written by whoever waits (the executor, the
// shared-memory latency path) only once it has spun without progress, and read by the flight
// recorder's dump from another thread. Relaxed atomics: a dump may see a note one step old.
#pragma once
#include <atomic>
#include <cstdint>

namespace weft {

struct WaitNote {
  std::atomic<uint64_t> record{0};  // the operation it belongs to (its flight recorder number + 1)
  std::atomic<int32_t> peer{-1};   // the rank waited for (-1: not waiting, or not known)
  std::atomic<uint32_t> done{0};   // schedule steps completed
  std::atomic<uint32_t> total{0};  // schedule steps of the operation (0: no schedule)

  void note(int32_t p, uint32_t d, uint32_t t) {
    peer.store(p, std::memory_order_relaxed);
    done.store(d, std::memory_order_relaxed);
    total.store(t, std::memory_order_relaxed);
  }
  // A new operation: no note yet.
  void begin(uint64_t rec) {
    peer.store(-1, std::memory_order_relaxed);
    record.store(rec + 1, std::memory_order_release);
  }
};

}  // namespace weft
