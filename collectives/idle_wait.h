// How a waiting rank spends its time (internal): poll hard, then yield the
// CPU between polls, then sleep — shared by the transports' waits and by the
// communicator's multi-transport wait.
//
// Why not read the clock on every poll: on this VM (clocksource kvm-clock)
// steady_clock::now() costs 70-80 ns, more than a whole shared-memory poll;
// perf showed three quarters of a small AllReduce's time inside
// __vdso_clock_gettime. The clock is read once every kPollsPerTick polls
// while polling hard, and before every yield or sleep (a sched_yield(2) or
// futex(2) costs far more than a clock read there).
//
//   IdleWait w(deadline, std::chrono::microseconds(spin_us));
//   for (;;) {
//     const bool moved = poll();
//     if (done()) return ok;
//     switch (w.next(moved)) {
//       case IdleWait::kPoll: continue;
//       case IdleWait::kYield: sched_yield(); continue;
//       case IdleWait::kSleep: sleep_until_news(w.sleep_budget()); continue;
//       case IdleWait::kExpired: return deadline_exceeded(...);
//     }
//   }
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>

#include "weft/collectives/transport.h"

namespace weft::coll::internal {

// steady_clock::now() from CLOCK_MONOTONIC_COARSE: 10-25 ns here instead of
// 70-140 ns, at most one tick (1-4 ms) behind — for deadlines of a call,
// which are seconds, not for timing. libstdc++'s steady_clock is
// CLOCK_MONOTONIC, the clock the coarse one is a cheaper view of
// (clock_gettime(2)).
inline Clock::time_point coarse_now() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

class IdleWait {
 public:
  enum Action { kPoll, kYield, kSleep, kExpired };
  // A running peer answers within microseconds; a descheduled one comes back
  // after milliseconds on a loaded host. Hard polling past this is wasted.
  static constexpr auto kHardSpin = std::chrono::microseconds(5);
  static constexpr unsigned kPollsPerTick = 64;

  IdleWait(Deadline deadline, std::chrono::microseconds spin) : deadline_(deadline), spin_(spin) {}

  // Called after every poll; `moved` = the poll moved data (resets the idle
  // clock). Returns what to do before the next poll.
  Action next(bool moved) {
    if (moved) idle_since_ = {};
    if (phase_ == kPoll && ++polls_ < kPollsPerTick) return kPoll;
    polls_ = 0;
    now_ = Clock::now();
    ticked_ = true;
    if (now_ > deadline_) return kExpired;
    if (idle_since_ == Clock::time_point{}) idle_since_ = now_;
    const auto idle = now_ - idle_since_;
    phase_ = idle < kHardSpin ? kPoll : idle < spin_ ? kYield : kSleep;
    return phase_;
  }
  // True once per clock read (consumed): time for checks that cost a system
  // call (peer liveness).
  bool ticked() {
    const bool t = ticked_;
    ticked_ = false;
    return t;
  }
  Clock::time_point now() const { return now_; }
  // How long a sleep may last: until the deadline, at most `cap`.
  std::chrono::milliseconds sleep_budget(std::chrono::milliseconds cap) const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now_) +
                      std::chrono::milliseconds(1);
    return std::clamp(left, std::chrono::milliseconds(0), cap);
  }

 private:
  Deadline deadline_;
  std::chrono::microseconds spin_;
  Clock::time_point now_{}, idle_since_{};
  unsigned polls_ = 0;
  Action phase_ = kPoll;
  bool ticked_ = false;
};

}  // namespace weft::coll::internal
