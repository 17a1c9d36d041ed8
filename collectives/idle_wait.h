// How a waiting rank spends its time (internal): poll hard, then yield the
// CPU between polls, then sleep — shared by the transports' waits and by the
// communicator's multi-transport wait.
//
// How long to poll hard depends on whether the ranks of this host fit on
// its CPUs (hard_spin_for). If they do, the rank a wait is for has a CPU of
// its own and answers within microseconds: poll hard for the whole spin
// budget, as Open MPI does unless mpirun finds the node oversubscribed
// (mpi_yield_when_idle "will default to 1 when oversubscribing nodes",
// ompi_mpi_params.c) and LLVM's OpenMP runtime with KMP_USE_YIELD=2. A
// yield there hands the CPU to whatever else runs on the host: on this
// 2-core VM at load 3 a 2-rank shared-memory AllReduce of 4 B took 24 us
// per call with 5 us of hard polling before each yield, and 0.45 us (Open
// MPI vader's figure in the same minute) with 50 us or more. If they do
// not fit, hard polling starves the very rank the wait is for (4 ranks on 2
// cores: 4 B took 18 us with 5 us of hard polling, 290 us with 50 us,
// 1.4 ms with 500 us): poll hard only kHardSpin, then yield between polls.
//
// Why not read the clock on every poll: on this VM (clocksource kvm-clock)
// steady_clock::now() costs 70-80 ns, more than a whole shared-memory poll;
// perf showed three quarters of a small AllReduce's time inside
// __vdso_clock_gettime. The clock is read once every kPollsPerTick polls
// (a transport whose poll is a system call, TCP's epoll_wait(2) at about a
// microsecond here, reads it after every poll: 64 of those polls made a
// "5 us" hard phase last over 64 us, and 4 ranks on 2 cores never yielded)
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

#include <sched.h>
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

// How long the waits of one transport poll hard before they yield, adapted
// to what the last waits met (as glibc's adaptive mutexes adapt their spin
// count): a wait whose news came while it polled hard doubles it, up to
// `max`; a wait that polled hard in vain halves it, down to
// IdleWait::kHardSpin. On a host whose ranks fit its CPUs, other work can
// still put two ranks on one CPU for a while, and then a rank that polls
// hard keeps the rank it waits for off the CPU until its time slice ends
// (milliseconds; Open MPI's vader showed 4 ms per 4 B AllReduce at times on
// this VM at load 4). The budget falls to kHardSpin within a few such
// waits and comes back once the peer answers in time again. Not
// thread-safe: one per transport, used under the transport's lock.
class SpinBudget {
 public:
  explicit SpinBudget(std::chrono::microseconds max) : max_(max), cur_(max) {}
  std::chrono::microseconds get() const { return cur_; }
  void hit() { cur_ = std::min(max_, cur_ * 2); }
  void miss();

 private:
  std::chrono::microseconds max_, cur_;
};

class IdleWait {
 public:
  enum Action { kPoll, kYield, kSleep, kExpired };
  // A running peer answers within microseconds; a descheduled one comes back
  // after milliseconds on a loaded host. Where ranks outnumber CPUs, hard
  // polling past this is wasted.
  static constexpr auto kHardSpin = std::chrono::microseconds(5);
  static constexpr unsigned kPollsPerTick = 64;

  // Polls hard for `hard` (or the budget's current value, which it then
  // updates), then yields between polls until `spin` has passed without
  // news, then sleeps.
  IdleWait(Deadline deadline, std::chrono::microseconds spin, std::chrono::microseconds hard = kHardSpin)
      : deadline_(deadline), spin_(spin), hard_(hard) {}
  IdleWait(Deadline deadline, std::chrono::microseconds spin, SpinBudget* budget,
           unsigned polls_per_tick = kPollsPerTick)
      : deadline_(deadline), spin_(spin), hard_(budget->get()), budget_(budget), polls_per_tick_(polls_per_tick) {}
  IdleWait(const IdleWait&) = delete;
  IdleWait& operator=(const IdleWait&) = delete;
  // A wait that polled and ended while still polling hard was a hit.
  ~IdleWait() {
    if (budget_ && phase_ == kPoll && (polls_ > 0 || ticked_once_)) budget_->hit();
  }

  // Called after every poll; `moved` = the poll moved data (resets the idle
  // clock); `shares_cpu` = the rank waited for last ran on this CPU, so it
  // runs only once this rank stops polling (polls hard kHardSpin at most).
  // Returns what to do before the next poll.
  Action next(bool moved, bool shares_cpu = false) {
    if (moved) idle_since_ = {};
    if (phase_ == kPoll && ++polls_ < polls_per_tick_) return kPoll;
    polls_ = 0;
    now_ = Clock::now();
    ticked_ = ticked_once_ = true;
    if (now_ > deadline_) return kExpired;
    if (idle_since_ == Clock::time_point{}) idle_since_ = now_;
    const auto idle = now_ - idle_since_;
    const Action was = phase_;
    phase_ = idle < (shares_cpu ? kHardSpin : hard_) ? kPoll : idle < spin_ ? kYield : kSleep;
    if (was == kPoll && phase_ != kPoll && budget_) budget_->miss();
    return phase_;
  }
  // The caller yielded while polling hard (a shared-memory wait whose peer
  // is off its CPU): the next call reads the clock, as after any yield, so
  // that the phases keep their lengths in time, not in polls.
  void yielded() { polls_ = polls_per_tick_ - 1; }
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
  std::chrono::microseconds spin_, hard_;
  SpinBudget* budget_ = nullptr;
  unsigned polls_per_tick_ = kPollsPerTick;
  Clock::time_point now_{}, idle_since_{};
  unsigned polls_ = 0;
  Action phase_ = kPoll;
  bool ticked_ = false, ticked_once_ = false;
};

inline void SpinBudget::miss() { cur_ = std::max(IdleWait::kHardSpin, cur_ / 2); }

// CPUs this process may run on (sched_getaffinity(2); a cgroup CPU quota
// is not seen).
inline int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

// Moves the calling thread onto the CPUs in `to` now (sched_setaffinity(2)
// migrates a thread off a CPU it may no longer use before it returns), then
// gives it the mask `all` back, which moves nothing. Why: two tasks that keep
// taking turns on one CPU every few microseconds stay together although
// another CPU is free, because the load balancer does not move a task that
// ran within sched_migration_cost (0.5 ms) until its attempts failed a few
// times (kernel/sched/fair.c, can_migrate_task, task_hot), and both always
// just ran. On this 2-CPU VM a 2-rank 4 B AllReduce ran at 11-15 us per call
// (two context switches) in whole runs, 0.5 us once apart. A mask changed by
// another thread in between is overwritten with `all`.
inline void migrate_now(const cpu_set_t& to, const cpu_set_t& all) {
  if (::sched_setaffinity(0, sizeof to, &to) != 0) return;
  ::sched_setaffinity(0, sizeof all, &all);
}

// Moves the calling thread off `cpu` (migrate_now), where it may use another:
// the TCP and shared-memory transports' waits call it after yielding to a
// peer on their own CPU many times in a row.
inline void leave_cpu(int cpu) {
  cpu_set_t all;
  if (::sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2 || !CPU_ISSET(cpu, &all)) return;
  cpu_set_t others = all;
  CPU_CLR(cpu, &others);
  migrate_now(others, all);
}

// How many yields in a row to a peer on this rank's CPU before leave_cpu:
// odd ranks wait twice as long, so that two ranks that meet on a CPU do not
// both move to the same other one.
inline unsigned yields_before_leaving(int rank) { return rank % 2 ? 64 : 32; }

// How long a wait polls hard at most (the file comment says why): all of
// `spin` when the host's ranks fit the CPUs this process may use, else
// IdleWait::kHardSpin. ranks_on_host 0 (unknown) counts as `size`: every
// rank local.
inline std::chrono::microseconds hard_spin_for(int ranks_on_host, int size, std::chrono::microseconds spin,
                                               int cpus = usable_cpus()) {
  const int local = ranks_on_host > 0 ? ranks_on_host : size;
  return local <= cpus ? std::max(spin, IdleWait::kHardSpin) : IdleWait::kHardSpin;
}

}  // namespace weft::coll::internal
