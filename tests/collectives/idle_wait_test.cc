// How a waiting rank spends its time (collectives/idle_wait.h): how long it
// polls hard for a given number of ranks per CPU, how the transports'
// adaptive budget moves, and which action a wait takes when.
#include "idle_wait.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace weft::coll::internal {
namespace {

using std::chrono::microseconds;

struct HardSpinCase {
  int ranks_on_host, size, cpus;
  int spin_us;
  int want_us;
};

class HardSpinFor : public ::testing::TestWithParam<HardSpinCase> {};

TEST_P(HardSpinFor, PollsHardForTheWholeSpinOnlyWhenTheHostsRanksFitItsCpus) {
  const HardSpinCase& c = GetParam();
  EXPECT_EQ(hard_spin_for(c.ranks_on_host, c.size, microseconds(c.spin_us), c.cpus).count(), c.want_us);
}

INSTANTIATE_TEST_SUITE_P(
    RanksAndCpus, HardSpinFor,
    ::testing::Values(HardSpinCase{2, 2, 2, 5000, 5000},    // 2 ranks, 2 cores: poll hard all along
                      HardSpinCase{3, 13, 3, 2000, 2000},   // 13 ranks, 3 of them here, 3 cores
                      HardSpinCase{4, 4, 2, 5000, 5},       // 4 ranks on 2 cores: yield early
                      HardSpinCase{0, 13, 2, 2000, 5},      // unknown: all 13 local, 2 cores
                      HardSpinCase{0, 2, 7, 2000, 2000},    // unknown: both local, 7 cores
                      HardSpinCase{1, 5, 1, 0, 5},          // spin 0 still polls kHardSpin
                      HardSpinCase{7, 7, 5, 2000, 5}));

TEST(SpinBudget, DoublesOnAHitHalvesOnAMissWithinItsBounds) {
  SpinBudget b(microseconds(200));
  EXPECT_EQ(b.get().count(), 200);
  b.hit();
  EXPECT_EQ(b.get().count(), 200);  // never above max
  for (int want : {100, 50, 25, 12, 6, 5, 5}) {
    b.miss();
    EXPECT_EQ(b.get().count(), want);
  }
  for (int want : {10, 20, 40, 80, 160, 200}) {
    b.hit();
    EXPECT_EQ(b.get().count(), want);
  }
}

// A wait that is over before it polls is neither a hit nor a miss; one that
// ends while polling hard is a hit; one whose hard phase runs out is a miss.
TEST(SpinBudget, IdleWaitReportsHitsAndMissesToIt) {
  const Deadline far = Clock::now() + std::chrono::seconds(60);
  SpinBudget b(microseconds(3000));
  { IdleWait w(far, microseconds(3000), &b); }
  EXPECT_EQ(b.get().count(), 3000);
  for (int i = 0; i < 3; ++i) b.miss();  // 375 us
  {
    IdleWait w(far, microseconds(3000), &b);
    EXPECT_EQ(w.next(false), IdleWait::kPoll);
  }
  EXPECT_EQ(b.get().count(), 750);
  {
    IdleWait w(far, microseconds(100000), &b);
    IdleWait::Action a = IdleWait::kPoll;
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (a == IdleWait::kPoll && Clock::now() < until) a = w.next(false);
    EXPECT_EQ(a, IdleWait::kYield);
  }
  EXPECT_EQ(b.get().count(), 375);
}

// The phases in order, and news (moved) starting the idle clock again. The
// deadline is far beyond the 20 ms of polling and yielding: with 60 ms, a
// test thread descheduled for 40 ms at load 13 reached the deadline before
// the news, and the wait rightly said kExpired instead of kPoll. A thread
// descheduled for 18 ms between two clock reads goes from polling straight
// to sleeping, as it should: each step waits for its phase or a later one.
TEST(IdleWait, PollsThenYieldsThenSleepsThenExpires) {
  const auto t0 = Clock::now();
  IdleWait w(t0 + std::chrono::milliseconds(1000), microseconds(20000), microseconds(2000));
  auto until = [&](IdleWait::Action want, bool moved) {
    IdleWait::Action a = IdleWait::kPoll;
    while ((a = w.next(moved)) < want && Clock::now() - t0 < std::chrono::seconds(10)) {
      if (a == IdleWait::kSleep) std::this_thread::sleep_for(microseconds(200));
    }
    return Clock::now() - t0;
  };
  EXPECT_GE(until(IdleWait::kYield, false), microseconds(2000));
  EXPECT_GE(until(IdleWait::kSleep, false), microseconds(20000));
  EXPECT_EQ(w.next(true), IdleWait::kPoll);  // news: hard polling again
  EXPECT_GE(until(IdleWait::kExpired, false), std::chrono::milliseconds(1000));
}

// Two ranks on one CPU take turns: the waiting one polls hard only
// kHardSpin, however long its budget.
TEST(IdleWait, YieldsAfterKHardSpinWhenThePeerSharesTheCpu) {
  const auto t0 = Clock::now();
  IdleWait w(t0 + std::chrono::seconds(60), microseconds(50000), microseconds(50000));
  IdleWait::Action a = IdleWait::kPoll;
  while ((a = w.next(false, true)) == IdleWait::kPoll && Clock::now() - t0 < std::chrono::seconds(10)) {
  }
  EXPECT_EQ(a, IdleWait::kYield);
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(40));  // far below the 50 ms budget, even under load
}

}  // namespace
}  // namespace weft::coll::internal
