// HD AllReduce under a route plan with rounds: exact results with the
// plan's gates enforced by zero-byte tokens, the order the tokens impose,
// and zero-byte messages on every transport.
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gate_order.h"
#include "gated_calls.h"
#include "harness.h"
#include "rounds_plan.h"
#include "weft/routing/gates.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

int per_leaf_for(int ranks) { return ranks <= 5 ? 2 : 4; }

routing::RoutePlan plan_for(int ranks, unsigned seed) {
  const int per_leaf = per_leaf_for(ranks);
  return rounds_plan(ranks, per_leaf, per_leaf - 1, seed);
}

class RoundsAllreduce : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(RoundsAllreduce, HdIsExactWithTokensBetweenRounds) {
  const auto [transport, n] = GetParam();
  for (unsigned seed : {1u, 2u}) {
    const routing::RoutePlan plan = plan_for(n, seed);
    ASSERT_TRUE(routing::parse_plan(routing::plan_to_json(plan))) << "the synthetic plan is a valid plan file";
    auto gates = routing::plan_gates(plan);
    ASSERT_TRUE(gates) << gates.status().to_string();
    ASSERT_FALSE(gates->empty()) << "a plan with rounds must gate";
    for (size_t count : {size_t{1003}, size_t{7}}) {
      const int calls = 3;  // tokens of one call must not leak into the next
      const int tokens = gated_allreduces(transport, n, plan, Algorithm::kHalvingDoubling, count, 0, calls);
      // 1003 elements leave no data message empty: every zero-byte send is a token.
      if (count == 1003) {
        EXPECT_EQ(tokens, calls * static_cast<int>(gates->size())) << "one token per gate and call";
      }
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<std::string, int>>& p) {
  return std::get<0>(p.param) + "_" + std::to_string(std::get<1>(p.param)) + "ranks";
}
INSTANTIATE_TEST_SUITE_P(Collectives, RoundsAllreduce,
                         ::testing::Combine(::testing::Values("loopback", "tcp"), ::testing::Values(4, 5, 8, 13)), case_name);
// shm too, on fewer ranks: its setup (a segment per rank) dominates the
// test's time on a loaded 2-core host (13 ranks: ~12 s with or without gates).
INSTANTIATE_TEST_SUITE_P(Shm, RoundsAllreduce, ::testing::Combine(::testing::Values("shm"), ::testing::Values(4, 5)),
                         case_name);

TEST(RoundsOrder, AGatedRankSendsOnlyAfterTheTokenSourceHasItsData) {
  const int n = 13;
  const routing::RoutePlan plan = plan_for(n, 3);
  auto gates = routing::plan_gates(plan);
  ASSERT_TRUE(gates && !gates->empty());
  const auto sched = routing::build_schedule(routing::Collective::kAllreduceHd, n, 1);
  ASSERT_TRUE(sched);
  SendLog log(n, routing::hd_layout(n));
  run_ranks(
      n,
      [&](Communicator& comm) {
        std::vector<int32_t> v(4096, comm.rank());
        CollectiveOptions o;
        o.algorithm = Algorithm::kHalvingDoubling;
        ASSERT_TRUE(comm.allreduce(v.data(), v.data(), v.size(), DataType::kI32, ReduceOp::kSum, o));
        EXPECT_EQ(v[4095], n * (n - 1) / 2);
      },
      [&](CommConfig& c) {
        c.transport = "loopback";
        c.plan = plan;
        c.trace = [&](int rank, const TraceEvent& e) { log.trace(rank, e); };
      });
  log.expect_order(*gates, *sched);
}

TEST(RoundsSetup, APlanWhoseStepsAreNotHdsIsRejectedNamingTheFlow) {
  routing::RoutePlan plan = plan_for(4, 1);
  // 0 -> 1 is a flow of rs distance 1 (step 0); claim it for step 1 too.
  for (routing::PlanFlow& f : plan.flows) {
    if (f.src_rank == 0 && f.dst_rank == 1) {
      f.steps.push_back(1);
      f.rounds.push_back(0);
    }
  }
  MemoryStore store;
  CommConfig c;
  c.rank = 0;
  c.size = 4;
  c.transport = "loopback";
  c.plan = plan;
  auto comm = Communicator::create(c, store);
  ASSERT_FALSE(comm);
  EXPECT_NE(comm.status().message().find("(rank 0 -> 1) lists step 1 (rs), which has no such flow"), std::string::npos)
      << comm.status().message();
}

// kAuto under a route plan keeps to the plan's algorithm (communicator.cc):
// butterfly below the rule's HD threshold, the plan's algorithm from it —
// so a plan with rounds is enforced (one token per gate) at every size
// where the default rule would have picked ring or hybrid.
struct AutoCase {
  const char* collective;  // the plan's
  size_t count;            // i32 elements
  const char* phase;       // a step phase only kAuto's algorithm traces
};

class RoundsAuto : public ::testing::TestWithParam<AutoCase> {};

TEST_P(RoundsAuto, AutoRunsThePlansAlgorithmFromTheHdThreshold) {
  const AutoCase k = GetParam();
  const int n = 5;
  routing::RoutePlan plan = plan_for(n, 1);
  const bool hd_plan = std::string(k.collective) == "allreduce-hd";
  if (!hd_plan) {
    // A ring plan: the ring's flows, no rounds.
    plan.collective = k.collective;
    plan.flows.clear();
    for (int r = 0; r < n; ++r) {
      routing::PlanFlow f;
      f.src_rank = r;
      f.dst_rank = (r + 1) % n;
      f.src_host = "h" + std::to_string(r);
      f.dst_host = "h" + std::to_string((r + 1) % n);
      f.protocol = "udp";
      f.sport = static_cast<uint16_t>(49152 + r);
      f.dport = 4791;
      f.path = {"l0"};
      plan.flows.push_back(f);
    }
  }
  auto gates = routing::plan_gates(plan);
  ASSERT_TRUE(gates);
  ASSERT_EQ(gates->empty(), !hd_plan);
  std::atomic<int> tokens{0};
  std::mutex mu;
  std::set<std::string> phases;  // rank 1's (rank 0 folds out: 5 ranks)
  run_ranks(
      n,
      [&](Communicator& comm) {
        std::vector<int32_t> v(k.count);
        for (size_t i = 0; i < k.count; ++i) v[i] = comm.rank() + static_cast<int32_t>(i % 13);
        Status s = comm.allreduce(v.data(), v.data(), k.count, DataType::kI32, ReduceOp::kSum);  // kAuto
        ASSERT_TRUE(s) << s.to_string();
        for (size_t i = 0; i < k.count; ++i) {
          ASSERT_EQ(v[i], n * (n - 1) / 2 + n * static_cast<int32_t>(i % 13)) << "element " << i;
        }
      },
      [&](CommConfig& c) {
        c.transport = "loopback";
        c.plan = plan;
        c.timeout = 60s;
        // Without a plan this rule runs ring from 1 KiB and HD from 64 B.
        c.selection.rules = {{"*", INT_MAX, 64, 1024}};
        c.trace = [&](int rank, const TraceEvent& e) {
          if (e.kind == TraceEvent::kSend && e.bytes == 0) ++tokens;
          std::lock_guard<std::mutex> l(mu);
          if (rank == 1 && e.kind == TraceEvent::kStep) phases.emplace(e.phase);
        };
      });
  EXPECT_EQ(phases.count(k.phase), 1u) << "rank 1 traced: " << fmt::format("{}", fmt::join(phases, " "));
  const bool gated = hd_plan && std::string(k.phase) == "rs";
  EXPECT_EQ(tokens.load(), gated ? static_cast<int>(gates->size()) : 0) << "one token per gate, under HD only";
}

INSTANTIATE_TEST_SUITE_P(Collectives, RoundsAuto,
                         ::testing::Values(AutoCase{"allreduce-hd", 15, "butterfly"},  // 60 B
                                           AutoCase{"allreduce-hd", 16, "rs"},         // 64 B: HD
                                           AutoCase{"allreduce-hd", 4099, "rs"},       // 16 KiB: HD, not ring
                                           AutoCase{"allreduce-ring", 15, "butterfly"},
                                           AutoCase{"allreduce-ring", 64, "ring-rs"},  // 256 B: ring, not HD
                                           AutoCase{"allreduce-ring", 4099, "ring-rs"}),
                         [](const ::testing::TestParamInfo<AutoCase>& p) {
                           return std::string(p.param.collective[10] == 'h' ? "hd" : "ring") + "_plan_" +
                                  std::to_string(p.param.count * 4) + "B";
                         });

// Tokens are zero-byte messages: every transport must carry them in order
// between other messages.
class ZeroByte : public ::testing::TestWithParam<std::string> {};

TEST_P(ZeroByte, MessagesOfNoBytesKeepTheirPlaceAmongOthers) {
  run_ranks(
      2,
      [&](Communicator& comm) {
        const int peer = 1 - comm.rank();
        Transport* t = comm.transport_for(peer);
        ASSERT_NE(t, nullptr);
        std::vector<char> buf(5, comm.rank() == 0 ? 'x' : '.');
        auto mem = t->register_memory(buf.data(), buf.size());
        ASSERT_TRUE(mem) << mem.status().to_string();
        Pair* p = t->pair(peer);
        const Deadline deadline = Clock::now() + 20s;
        const size_t lens[] = {0, 5, 0, 0, 3};
        Ticket last = 0;
        for (size_t len : lens) {
          auto tk = comm.rank() == 0 ? p->send(**mem, 0, len) : p->recv(**mem, 0, len);
          ASSERT_TRUE(tk) << tk.status().to_string();
          last = *tk;
        }
        Status s = comm.rank() == 0 ? p->wait_send(last, deadline) : p->wait_recv(last, deadline);
        ASSERT_TRUE(s) << s.to_string();
        if (comm.rank() == 1) {
          EXPECT_EQ(std::string(buf.begin(), buf.end()), "xxxxx");
        }
        // Both ends still agree: a collective on the same pairs works.
        int32_t x = comm.rank() + 1;
        ASSERT_TRUE(comm.allreduce(&x, &x, 1, DataType::kI32, ReduceOp::kSum));
        EXPECT_EQ(x, 3);
      },
      [&](CommConfig& c) { c.transport = GetParam(); });
}

INSTANTIATE_TEST_SUITE_P(Collectives, ZeroByte, ::testing::Values("loopback", "tcp", "shm"));

}  // namespace
}  // namespace weft::coll::testing
