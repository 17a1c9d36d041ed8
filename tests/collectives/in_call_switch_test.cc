// In-call plan switches (docs/collectives-routes.md "Inside a stalled call"):
// a call stalled by a connection whose packets are dropped
// (TcpOptions::test_silent_sports, a gray failure on that flow's path) is
// abandoned by every rank and run again on the newer epoch, every result
// exact; without a newer epoch the call fails within its timeout as before.
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "epoch_files.h"
#include "harness.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

// A value per rank, call and element whose sum over ranks is exact in i32.
int32_t value(int rank, uint64_t call, size_t j) { return rank * 131 + static_cast<int32_t>(call * 7 + j % 97); }
int32_t sum(int n, uint64_t call, size_t j) { return 131 * n * (n - 1) / 2 + n * static_cast<int32_t>(call * 7 + j % 97); }

// Epoch 1 (plan B) puts rank 0's flow to rank 1 on a source port whose
// data is dropped; the calls on it stall. `late` after the switch to it the
// watcher publishes epoch 2 (plan A again), rank 1's file `lag` after the
// others': every rank must abandon the stalled call, and every rank run
// epoch 2 within 2 s of the stall, each call exact.
struct Stall {
  std::chrono::milliseconds lag{0};
  bool out_of_place = false;
  Algorithm algorithm = Algorithm::kHalvingDoubling;  // every fifth call butterfly
  // The flow whose data is dropped under plan B, and the rank that drops
  // it: its sender (never written) or its receiver (never read: the sender
  // may finish its call and start the next one).
  int from = 0, to = 1;
  bool at_receiver = false;
};

void stall_then_switch(int n, const Stall& st) {
  const std::chrono::milliseconds lag = st.lag;
  const bool out_of_place = st.out_of_place;
  const size_t nn = static_cast<size_t>(n);
  const TwoPlans plans = two_tcp_plans(n, "allreduce-hd");
  if (!plans.ok()) GTEST_SKIP() << "not enough free TCP ports on 127.0.0.1";
  const routing::RoutePlan& plan_a = plans.a;
  const routing::RoutePlan& plan_b = plans.b;
  const std::vector<uint16_t>& sports_b = plans.sports_b;
  const uint16_t cut = sports_b[static_cast<size_t>(st.from * n + st.to)];
  EpochDir dir;
  std::mutex mu;
  std::vector<Clock::time_point> at_one(nn), at_two(nn);
  std::vector<uint64_t> call_two(nn);
  std::atomic<int> on_one{0}, on_two{0};
  std::vector<std::optional<uint64_t>> switched_after(nn);  // the call after which a rank is on epoch 2
  int switched = 0;
  std::atomic<uint64_t> calls_done{0};
  std::atomic<bool> stop{false};
  Clock::time_point published_two{};

  std::thread watcher([&] {
    const auto deadline = Clock::now() + 20s;
    while (!stop && calls_done < 3 * nn && Clock::now() < deadline) std::this_thread::sleep_for(2ms);
    for (int r = 0; r < n; ++r) EXPECT_TRUE(publish(dir.file(r), epoch_json("incall", 1, plan_b)));
    while (!stop && on_one < n && Clock::now() < deadline) std::this_thread::sleep_for(2ms);
    // As the watcher would: the loss is seen, localised, re-planned.
    std::this_thread::sleep_for(500ms);
    {
      std::lock_guard<std::mutex> l(mu);
      published_two = Clock::now();
    }
    for (int r = 0; r < n; ++r) {
      if (r != 1) {
        EXPECT_TRUE(publish(dir.file(r), epoch_json("incall", 2, plan_a)));
      }
    }
    std::this_thread::sleep_for(lag);
    EXPECT_TRUE(publish(dir.file(1), epoch_json("incall", 2, plan_a)));
  });

  const size_t count = (1u << 18) + 3;  // 1 MiB + 3 elements of i32
  run_ranks(
      n,
      [&](Communicator& comm) {
        const int me = comm.rank();
        std::vector<int32_t> in(count), out(count);
        for (uint64_t i = 0; i < 40; ++i) {
          for (size_t j = 0; j < count; ++j) in[j] = value(me, i, j);
          CollectiveOptions o;
          o.algorithm = i % 5 == 4 ? Algorithm::kButterfly : st.algorithm;
          int32_t* result = out_of_place ? out.data() : in.data();
          Status s = comm.allreduce(in.data(), result, count, DataType::kI32, ReduceOp::kSum, o);
          ASSERT_TRUE(s) << "rank " << me << " call " << i << ": " << s.to_string();
          for (size_t j = 0; j < count; ++j) {
            ASSERT_EQ(result[j], sum(n, i, j)) << "rank " << me << " call " << i << " element " << j;
          }
          ++calls_done;
          // Every rank must make the same calls, but a rank one call ahead
          // sees epoch 2 one call later than the others: stop one call after
          // the last rank's switch. Whoever ends that call knows every
          // rank's: each entered it after recording its own.
          if (comm.plan_epoch() == 2 && !switched_after[static_cast<size_t>(me)]) {
            std::lock_guard<std::mutex> l(mu);
            switched_after[static_cast<size_t>(me)] = i;
            ++switched;
          }
          std::optional<uint64_t> last;
          {
            std::lock_guard<std::mutex> l(mu);
            if (switched == n) last = *std::max_element(switched_after.begin(), switched_after.end());
          }
          if (last && i > *last && i >= 12) break;
        }
        EXPECT_EQ(comm.plan_epoch(), 2u);
        const PlanEpochCounters c = comm.plan_epoch_counters();
        EXPECT_EQ(c.switches, 2u) << "rank " << me;
        EXPECT_EQ(c.in_call_switches, 1u) << "rank " << me;
        EXPECT_EQ(c.refused(), 0u);
      },
      [&](CommConfig& c) {
        c.transport = "tcp";
        c.plan = plan_a;
        c.plan_epochs = dir.file(c.rank);
        c.job = "incall";
        c.plan_poll = 20ms;
        c.timeout = 8s;
        c.switch_stall = 200ms;
        if (c.rank == (st.at_receiver ? st.to : st.from)) c.tcp.test_silent_sports = {cut};
        c.trace = [&](int rank, const TraceEvent& e) {
          if (e.kind != TraceEvent::kEpoch) return;
          std::lock_guard<std::mutex> l(mu);
          if (e.epoch == 1) {
            at_one[static_cast<size_t>(rank)] = Clock::now();
            ++on_one;
          } else if (e.epoch == 2) {
            EXPECT_EQ(e.phase, "plan-epoch-in-call") << "rank " << rank;
            at_two[static_cast<size_t>(rank)] = Clock::now();
            call_two[static_cast<size_t>(rank)] = e.call;
            ++on_two;
          }
        };
      });
  stop = true;
  watcher.join();
  ASSERT_EQ(on_two.load(), n);
  for (size_t r = 0; r < nn; ++r) {
    // The stall began at the switch to epoch 1 at the latest.
    const auto after = std::chrono::duration_cast<std::chrono::milliseconds>(at_two[r] - at_one[r]);
    EXPECT_LT(after, 2s) << "rank " << r << " ran epoch 2 " << after.count() << " ms after the stall began";
    EXPECT_GE(at_two[r], published_two) << "rank " << r;
  }
  if (st.at_receiver) {
    // The receiver was still in the call its peers had finished: they ran
    // it again with it (from their kept inputs), then their own.
    for (size_t r = 0; r < nn; ++r) {
      const uint64_t want = call_two[static_cast<size_t>(st.to)] + (static_cast<int>(r) == st.to ? 0 : 1);
      EXPECT_EQ(call_two[r], want) << "rank " << r << " switched in call " << call_two[r];
    }
  }
}

TEST(InCallSwitch, AStalledCallIsRunAgainOnTheNewEpochByEveryRankExactly) { stall_then_switch(4, Stall{}); }

TEST(InCallSwitch, OutOfPlaceCallsAreRunAgainExactly) {
  Stall st;
  st.out_of_place = true;
  stall_then_switch(4, st);
}

// Butterfly's last step pairs 0 and 2: rank 0's message to rank 2 leaves
// (into the kernel's buffers) and rank 2's reaches rank 0, so ranks 0, 1
// and 3 finish the call and stall in the next one, rank 2 in this one.
TEST(InCallSwitch, RanksOneCallAheadRunThePreviousCallAgainFromTheirKeptInputs) {
  for (bool out_of_place : {false, true}) {
    Stall st;
    st.algorithm = Algorithm::kButterfly;
    st.from = 0;
    st.to = 2;
    st.at_receiver = true;
    st.out_of_place = out_of_place;
    stall_then_switch(4, st);
  }
}

// Rank 1 hears of epoch 2 from its peers before its own file shows it: it
// reads the file until it does (up to the grace), and joins the switch.
TEST(InCallSwitch, ARankThatSeesTheEpochLateStillJoinsTheSameSwitch) {
  Stall st;
  st.lag = 300ms;
  stall_then_switch(4, st);
}

// No newer epoch: the stalled call fails within its timeout (plus the stall
// verdict's window), naming the wait chain, and nothing hangs.
TEST(InCallSwitch, WithoutANewerEpochTheStalledCallFailsWithinItsTimeout) {
  const int n = 4;
  const size_t nn = n;
  const std::vector<uint16_t> ports = free_ports(nn + nn * nn);
  if (ports.size() < nn + nn * nn) GTEST_SKIP() << "not enough free TCP ports on 127.0.0.1";
  const std::vector<uint16_t> dports(ports.begin(), ports.begin() + n);
  const std::vector<uint16_t> sports(ports.begin() + n, ports.end());
  const routing::RoutePlan plan = tcp_plan(n, "allreduce-hd", dports, sports);
  EpochDir dir;
  const auto timeout = 2s;
  std::atomic<int> failed{0};
  run_ranks(
      n,
      [&](Communicator& comm) {
        std::vector<int32_t> v((1u << 16) + 3, comm.rank());
        const auto start = Clock::now();
        Status s = comm.allreduce(v.data(), v.data(), v.size(), DataType::kI32, ReduceOp::kSum);
        const auto took = Clock::now() - start;
        EXPECT_FALSE(s) << "rank " << comm.rank();
        EXPECT_LT(took, timeout + 1500ms) << "rank " << comm.rank() << ": " << s.to_string();
        if (!s) ++failed;
        EXPECT_EQ(comm.plan_epoch_counters().in_call_switches, 0u);
      },
      [&](CommConfig& c) {
        c.transport = "tcp";
        c.plan = plan;
        c.plan_epochs = dir.file(c.rank);  // never published
        c.job = "incall";
        c.timeout = timeout;
        c.switch_stall = 100ms;
        if (c.rank == 0) c.tcp.test_silent_sports = {sports[1]};
      });
  EXPECT_EQ(failed.load(), n);
}

}  // namespace
}  // namespace weft::coll::testing
