// Waiter: the one way Weft waits for progress it cannot see coming (the executor, the progress
// engine, the shared-memory latency path, the NCCL loops). A poll that found nothing asks it what
// to do next: spin (a few pause instructions) for `spin` microseconds, then yield the core for
// `yield` more (three spin periods unless set), then sleep on the caller's event (a transport's
// wait_for_event, a futex, a short sleep) so that ranks and threads outnumbering cores do not
// starve each other. Anything that moved resets it. The checks that end a wait (abort, deadline, a
// dead peer, the watchdog) are the caller's: they run once the spin is over, and Every paces the
// costly ones.
#pragma once
#include <sched.h>

#include <chrono>

namespace weft {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

class Waiter {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Phase { kSpin, kYield, kSleep };

  explicit Waiter(std::chrono::microseconds spin = std::chrono::microseconds(50)) : spin_(spin), yield_(spin * 3) {}
  Waiter(std::chrono::microseconds spin, std::chrono::microseconds yield) : spin_(spin), yield_(yield) {}
  void set_spin(std::chrono::microseconds spin) {
    spin_ = spin;
    yield_ = spin * 3;
  }
  // Something moved: the next idle poll starts a new wait.
  void moved() { idle_ = false; }
  // A poll found nothing: the phase the wait is in, nothing done yet (for a caller that polls
  // between clock reads itself and sleeps on an event of its own). The first call starts the wait.
  Phase phase(Clock::time_point now) {
    if (!idle_) {
      idle_ = true;
      since_ = now;
      return Phase::kSpin;
    }
    const auto d = now - since_;
    if (d < spin_) return Phase::kSpin;
    return d < spin_ + yield_ ? Phase::kYield : Phase::kSleep;
  }
  // phase(), acted on: in kSpin it has already spun a little, in kYield it has yielded; in kSleep
  // the caller sleeps on its event (bounded by its deadline).
  Phase idle(Clock::time_point now) {
    const bool started = idle_;
    const Phase p = phase(now);
    if (p == Phase::kSpin && started) {
      for (int i = 0; i < 16; ++i) cpu_relax();
    } else if (p == Phase::kYield) {
      sched_yield();
    }
    return p;
  }
  // How long the current wait has lasted (zero when not waiting).
  Clock::duration waited(Clock::time_point now) const { return idle_ ? now - since_ : Clock::duration::zero(); }
  bool waiting() const { return idle_; }

 private:
  std::chrono::microseconds spin_, yield_;
  bool idle_ = false;
  Clock::time_point since_{};
};

// How often a wait asks whether a peer died (a kill() and a read of /proc/<pid>/stat for a
// shared-memory peer, which would otherwise compete with the ranks doing the work on a busy
// machine) and runs its watchdog (a question to the store).
inline constexpr std::chrono::milliseconds kPeerCheckEvery{5};
inline constexpr std::chrono::milliseconds kWatchdogEvery{100};

// Paces a costly check of a wait (a peer's liveness, the watchdog): due() is true at most once per
// period, the first time at `first` (default: the first call).
class Every {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Every(Clock::duration period, Clock::time_point first = {}) : period_(period), next_(first) {}
  bool due(Clock::time_point now) {
    if (now < next_) return false;
    next_ = now + period_;
    return true;
  }
  // The next due() is true at once.
  void now() { next_ = Clock::time_point{}; }
  void reset(Clock::time_point first) { next_ = first; }

 private:
  Clock::duration period_;
  Clock::time_point next_;
};

}  // namespace weft
