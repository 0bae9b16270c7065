// Waiter: the one way Weft waits for progress it cannot see coming. A poll that found nothing
// asks it what to do next: spin (a few pause instructions) for `spin` microseconds, then yield
// the core for three more spin periods, then sleep on the caller's event (a transport's
// wait_for_event, a futex) so that ranks and threads outnumbering cores do not starve each other.
// Anything that moved resets it. The checks that end a wait (abort, deadline, a dead peer) are the
// caller's: they run once the spin is over, and `checks_due` paces the costly ones.
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

  explicit Waiter(std::chrono::microseconds spin = std::chrono::microseconds(50)) : spin_(spin) {}
  void set_spin(std::chrono::microseconds spin) { spin_ = spin; }
  // Something moved: the next idle poll starts a new wait.
  void moved() { idle_ = false; }
  // A poll found nothing. Returns the phase the wait is in; in kSpin it has already spun a little,
  // in kYield it has yielded; in kSleep the caller sleeps on its event (bounded by its deadline).
  Phase idle(Clock::time_point now) {
    if (!idle_) {
      idle_ = true;
      since_ = now;
      return Phase::kSpin;
    }
    const auto d = now - since_;
    if (d < spin_) {
      for (int i = 0; i < 16; ++i) cpu_relax();
      return Phase::kSpin;
    }
    if (d < spin_ * 4) {
      sched_yield();
      return Phase::kYield;
    }
    return Phase::kSleep;
  }
  // How long the current wait has lasted (zero when not waiting).
  Clock::duration waited(Clock::time_point now) const { return idle_ ? now - since_ : Clock::duration::zero(); }
  bool waiting() const { return idle_; }

 private:
  std::chrono::microseconds spin_;
  bool idle_ = false;
  Clock::time_point since_{};
};

}  // namespace weft
