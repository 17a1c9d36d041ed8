// Ring AllReduce under a route plan with rounds (ring_gates.cc): exact
// results with the gates of every repetition enforced by zero-byte tokens,
// and the order they impose, seen in the trace.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include <cstdio>
#include <thread>

#include <unistd.h>

#include "epoch_files.h"
#include "gated_calls.h"
#include "harness.h"
#include "rounds_plan.h"
#include "weft/routing/gates.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Ranks spread round robin over 2 leaves joined by one spine: from 4 ranks
// on, two or more ring flows leave a leaf, so every repetition runs in two
// rounds or more. (3 ranks can never share a directed link: at most one of
// the three flows leaves each leaf.)
routing::RoutePlan ring_plan(int ranks, unsigned seed) { return ring_rounds_plan(ranks, 2, 1, seed); }

TEST(RingRoundsPlan, EveryTestPlanHasRoundsAndGatesInEveryRepetition) {
  for (int n : {4, 5, 6, 7}) {
    const routing::RoutePlan plan = ring_plan(n, 1);
    ASSERT_TRUE(routing::parse_plan(routing::plan_to_json(plan))) << "the synthetic plan is a valid plan file";
    auto gates = routing::ring_plan_gates(plan);
    ASSERT_TRUE(gates) << gates.status().to_string();
    std::set<int> steps;
    for (const routing::Gate& g : *gates) steps.insert(g.step);
    EXPECT_EQ(steps.size(), static_cast<size_t>(2 * (n - 1))) << n << " ranks: a gate in every repetition";
  }
}

TEST(RingRoundsPlan, AFlowThatIsNotARingFlowIsRefusedNamingIt) {
  routing::RoutePlan plan = ring_plan(4, 1);
  plan.flows[2].dst_rank = 0;
  auto gates = routing::ring_plan_gates(plan);
  ASSERT_FALSE(gates);
  EXPECT_EQ(gates.status().message(), "route plan: flow 2 -> 0 is not a ring flow (r -> r + 1) of 4 ranks");
}

class RingRounds : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(RingRounds, IsExactWithTokensBetweenRounds) {
  const auto [transport, n] = GetParam();
  for (unsigned seed : {1u, 2u}) {
    const routing::RoutePlan plan = ring_plan(n, seed);
    auto gates = routing::ring_plan_gates(plan);
    ASSERT_TRUE(gates && !gates->empty());
    // 1003: every chunk whole in one segment; 2: most chunks empty; 4099
    // with 1 KiB segments: chunks of several segments.
    for (const auto& [count, segment] : {std::pair<size_t, size_t>{1003, 0}, {2, 0}, {4099, 1024}}) {
      const int calls = 3;  // tokens of one call must not leak into the next
      const int tokens = gated_allreduces(transport, n, plan, Algorithm::kRing, count, segment, calls);
      // 1003 elements leave no data message empty: every zero-byte send is a token.
      if (count == 1003) {
        EXPECT_EQ(tokens, calls * static_cast<int>(gates->size())) << "one token per gate and call";
      }
    }
  }
}

std::string ring_case_name(const ::testing::TestParamInfo<std::tuple<std::string, int>>& p) {
  return std::get<0>(p.param) + "_" + std::to_string(std::get<1>(p.param)) + "ranks";
}
INSTANTIATE_TEST_SUITE_P(Collectives, RingRounds,
                         ::testing::Combine(::testing::Values("loopback", "tcp"), ::testing::Values(4, 5, 6, 7)),
                         ring_case_name);
INSTANTIATE_TEST_SUITE_P(Shm, RingRounds, ::testing::Combine(::testing::Values("shm"), ::testing::Values(4)), ring_case_name);

// For every gate {u, a, d, u'}: the flow into d of repetition u' was sent
// before d's token to a, and the token before a's data of repetition u.
// With one segment per chunk, a rank's k-th data send goes out in
// repetition k, and d's tokens to a go out in the order of their repetitions.
TEST(RingRoundsOrder, AGatedRankSendsOnlyAfterTheTokenSourceHasItsData) {
  const int n = 7;
  const routing::RoutePlan plan = ring_plan(n, 3);
  auto gates = routing::ring_plan_gates(plan);
  ASSERT_TRUE(gates && !gates->empty());
  std::mutex mu;
  // by rank: data sends (to next) and tokens (by receiver), in order.
  std::vector<std::vector<Clock::time_point>> data(static_cast<size_t>(n));
  std::vector<std::map<int, std::vector<Clock::time_point>>> token(static_cast<size_t>(n));
  run_ranks(
      n,
      [&](Communicator& comm) {
        std::vector<int32_t> v(7 * 300, comm.rank());
        CollectiveOptions o;
        o.algorithm = Algorithm::kRing;
        ASSERT_TRUE(comm.allreduce(v.data(), v.data(), v.size(), DataType::kI32, ReduceOp::kSum, o));
        EXPECT_EQ(v.back(), n * (n - 1) / 2);
      },
      [&](CommConfig& c) {
        c.transport = "loopback";
        c.plan = plan;
        c.trace = [&](int rank, const TraceEvent& e) {
          if (e.kind != TraceEvent::kSend) return;
          const auto at = Clock::now();
          std::lock_guard<std::mutex> l(mu);
          const auto r = static_cast<size_t>(rank);
          if (e.bytes == 0) {
            token[r][e.peer].push_back(at);
          } else {
            data[r].push_back(at);
          }
        };
      });
  for (auto& d : data) ASSERT_EQ(d.size(), static_cast<size_t>(2 * (n - 1))) << "one data message per repetition";
  // The k-th token from d to a vouches for the k-th smallest after_step.
  std::map<std::pair<int, int>, std::vector<int>> vouches;
  for (const routing::Gate& g : *gates) vouches[{g.from, g.waiter}].push_back(g.after_step);
  for (auto& [pair, steps] : vouches) std::sort(steps.begin(), steps.end());
  for (const routing::Gate& g : *gates) {
    SCOPED_TRACE(::testing::Message() << "gate: rank " << g.waiter << " in repetition " << g.step << " waits for rank "
                                      << g.from << " after repetition " << g.after_step);
    const auto& steps = vouches[{g.from, g.waiter}];
    const size_t k = static_cast<size_t>(std::find(steps.begin(), steps.end(), g.after_step) - steps.begin());
    const auto& tokens = token[static_cast<size_t>(g.from)][g.waiter];
    ASSERT_LT(k, tokens.size());
    const int src = (g.from + n - 1) % n;
    const auto data_in = data[static_cast<size_t>(src)][static_cast<size_t>(g.after_step)];
    const auto data_out = data[static_cast<size_t>(g.waiter)][static_cast<size_t>(g.step)];
    EXPECT_LE(data_in, tokens[k]) << "the token left before the data it vouches for was sent";
    EXPECT_LE(tokens[k], data_out) << "the gated rank sent before its token was sent";
  }
}

}  // namespace
}  // namespace weft::coll::testing

namespace weft::coll::testing {
namespace {

// A plan epoch whose ring flows have rounds gates the ring from the call the
// ranks adopt it at (plan_round_gates at the switch): no token before, one
// per gate in every call after; results exact throughout.
TEST(RingRoundsEpoch, AnEpochWithRoundsGatesTheRingFromTheCallItIsAdoptedAt) {
  const int n = 4, calls = 40;
  const routing::RoutePlan with_rounds = ring_plan(n, 1);
  routing::RoutePlan without = with_rounds;
  for (routing::PlanFlow& f : without.flows) f.rounds = {0, 0};
  for (routing::PlanStep& s : without.steps) s.rounds = 1;
  auto gates = routing::ring_plan_gates(with_rounds);
  ASSERT_TRUE(gates && !gates->empty());
  const std::string path = ::testing::TempDir() + "weft-ring-epoch-" + std::to_string(::getpid());
  ASSERT_TRUE(publish(path, epoch_json("ring-epoch", 1, with_rounds)));
  std::atomic<int> tokens{0};
  std::atomic<int64_t> switched_at{-1};
  run_ranks(
      n,
      [&](Communicator& comm) {
        std::vector<int32_t> v(1003);
        CollectiveOptions o;
        o.algorithm = Algorithm::kRing;
        for (int call = 0; call < calls; ++call) {
          for (size_t i = 0; i < v.size(); ++i) v[i] = comm.rank() + static_cast<int32_t>(i % 31) + call;
          ASSERT_TRUE(comm.allreduce(v.data(), v.data(), v.size(), DataType::kI32, ReduceOp::kSum, o));
          for (size_t i = 0; i < v.size(); ++i) {
            ASSERT_EQ(v[i], n * (n - 1) / 2 + n * (static_cast<int32_t>(i % 31) + call)) << "call " << call;
          }
          if (call % 10 == 9) std::this_thread::sleep_for(15ms);  // let plan_poll pass
        }
        EXPECT_EQ(comm.plan_epoch(), 1u);
      },
      [&](CommConfig& c) {
        c.transport = "loopback";
        c.plan = without;
        c.plan_epochs = path;
        c.job = "ring-epoch";
        c.plan_poll = 10ms;
        c.timeout = 30s;
        c.trace = [&](int, const TraceEvent& e) {
          if (e.kind == TraceEvent::kSend && e.bytes == 0) ++tokens;
          if (e.kind == TraceEvent::kEpoch) switched_at = static_cast<int64_t>(e.call);
        };
      });
  std::remove(path.c_str());
  ASSERT_GE(switched_at.load(), 0) << "the ranks never adopted the epoch";
  EXPECT_EQ(tokens.load(), static_cast<int>(gates->size()) * (calls - static_cast<int>(switched_at.load())))
      << "switched before call " << switched_at.load();
}

}  // namespace
}  // namespace weft::coll::testing
