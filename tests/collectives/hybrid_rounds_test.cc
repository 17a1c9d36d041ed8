// Hybrid AllReduce under an allreduce-hybrid route plan
// (allreduce_hybrid.cc, hybrid_plan.cc): exact results with the plan's
// rounds enforced by zero-byte tokens, also between the legs of different
// local ranks; the order the tokens impose, seen in the trace; kAuto keeps
// to hybrid; plans whose flows are not hybrid's on the communicator's hosts
// refused naming the flow. Several "hosts" on one machine: CommConfig::host.
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "gate_order.h"
#include "gated_calls.h"
#include "harness.h"
#include "planner_plans.h"
#include "plan_epochs.h"
#include "tcp/tcp_transport.h"
#include "weft/routing/gates.h"
#include "weft/routing/hybrid_inter_host.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

// Hosts of `per_host` consecutive ranks: the plan's grouping.
std::function<void(CommConfig&)> on_hosts(int per_host, const routing::RoutePlan& plan) {
  return [per_host, plan](CommConfig& c) {
    c.host = host_name(c.rank / per_host);
    c.plan = plan;
  };
}

std::vector<std::vector<int>> blocks(int hosts, int per_host) {
  std::vector<std::vector<int>> out(static_cast<size_t>(hosts));
  for (int r = 0; r < hosts * per_host; ++r) out[static_cast<size_t>(r / per_host)].push_back(r);
  return out;
}

TEST(HybridPlan, TheTestPlansHaveGatesThatTieLegsOfDifferentLocalRanks) {
  for (const auto& [hosts, per_host] : {std::pair{2, 2}, {4, 2}}) {
    const routing::RoutePlan plan = hybrid_route_plan(hosts, per_host, 1, 1);
    ASSERT_TRUE(routing::parse_plan(routing::plan_to_json(plan))) << "a valid plan file";
    auto gates = routing::plan_gates(plan);
    ASSERT_TRUE(gates) << gates.status().to_string();
    int across = 0;
    for (const routing::Gate& g : *gates) across += g.waiter % per_host != g.from % per_host;
    EXPECT_GT(across, 0) << hosts << " x " << per_host << ": a gate between legs";
    // Every flow is an inter-host flow of hybrid on consecutive hosts.
    EXPECT_TRUE(internal::check_hybrid_plan(plan, [&] {
      std::vector<int> host_of;
      for (int r = 0; r < hosts * per_host; ++r) host_of.push_back(r / per_host);
      return host_of;
    }()));
  }
}

class HybridRounds : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(HybridRounds, IsExactWithTokensBetweenRounds) {
  const auto [transport, hosts] = GetParam();
  const int per_host = 2, calls = 3;
  const routing::RoutePlan plan = hybrid_route_plan(hosts, per_host, 1, 1);
  auto gates = routing::plan_gates(plan);
  ASSERT_TRUE(gates && !gates->empty());
  // 1: local rank 1's leg moves nothing (empty data messages among the
  // tokens); 1003: no data message empty, so every zero-byte send is a
  // token; 4099: odd blocks on every leg.
  for (size_t count : {size_t{1}, size_t{1003}, size_t{4099}}) {
    SCOPED_TRACE(::testing::Message() << count << " elements");
    const int tokens = gated_allreduces(transport, hosts * per_host, plan, Algorithm::kHybrid, count, 0, calls,
                                        on_hosts(per_host, plan));
    if (count == 1003) {
      EXPECT_EQ(tokens, calls * static_cast<int>(gates->size())) << "one token per gate and call";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Collectives, HybridRounds,
                         ::testing::Combine(::testing::Values("tcp", "loopback", "auto"), ::testing::Values(2, 4)),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, int>>& p) {
                           return std::get<0>(p.param) + "_" + std::to_string(std::get<1>(p.param)) + "hostsX2";
                         });

// Over TCP between hosts (shm inside them, as `auto` runs hybrid), the
// connection of every flow of the plan leaves from its planned source port
// for its planned listen port; results exact. (Other pairs of hosts carry
// gate tokens between legs alone, on ephemeral ports: zero bytes.)
TEST(HybridPlannedPorts, EveryInterHostConnectionUsesItsPlannedPorts) {
  const int hosts = 4, per_host = 2, n = hosts * per_host;
  const routing::RoutePlan plan = on_free_tcp_ports(hybrid_route_plan(hosts, per_host, 1, 1));
  ASSERT_EQ(plan.flows.front().protocol, "tcp") << "no free ports";
  std::atomic<int> checked{0};
  run_ranks(
      n,
      [&](Communicator& comm) {
        const size_t count = 4099;
        std::vector<int32_t> v(count);
        for (size_t i = 0; i < count; ++i) v[i] = comm.rank() + static_cast<int32_t>(i % 13);
        CollectiveOptions o;
        o.algorithm = Algorithm::kHybrid;
        Status s = comm.allreduce(v.data(), v.data(), count, DataType::kI32, ReduceOp::kSum, o);
        ASSERT_TRUE(s) << s.to_string();
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(v[i], n * (n - 1) / 2 + n * static_cast<int32_t>(i % 13));
        const int me = comm.rank();
        for (int p = 0; p < n; ++p) {
          auto* info = p == me ? nullptr : dynamic_cast<tcp::TcpTransportInfo*>(comm.transport_for(p));
          if (info == nullptr) continue;  // shm: a rank of this host
          for (const auto& c : info->connection_ports(p)) {
            const routing::PlanFlow* f = c.outgoing ? plan.find(me, p) : plan.find(p, me);
            if (f == nullptr) continue;
            EXPECT_EQ(c.local_port, c.outgoing ? f->sport : f->dport) << "rank " << me << " with rank " << p;
            EXPECT_EQ(c.remote_port, c.outgoing ? f->dport : f->sport) << "rank " << me << " with rank " << p;
            ++checked;
          }
        }
      },
      [&](CommConfig& c) {
        on_hosts(per_host, plan)(c);
        c.transport = "auto";
      });
  // Both ends of every flow of the legs.
  EXPECT_EQ(checked.load(), 2 * static_cast<int>(plan.flows.size()));
}

// For every gate {j, a, d, j'}: the flow into d of step j' was sent before
// d's token to a, and the token before a's data of step j — whether a and
// d run the same leg or not.
TEST(HybridRoundsOrder, AGatedRankSendsOnlyAfterTheTokenSourceHasItsData) {
  const int hosts = 4, per_host = 2, n = hosts * per_host;
  const routing::RoutePlan plan = hybrid_route_plan(hosts, per_host, 1, 1);
  auto gates = routing::plan_gates(plan);
  ASSERT_TRUE(gates && !gates->empty());
  int across = 0;
  for (const routing::Gate& g : *gates) across += g.waiter % per_host != g.from % per_host;
  ASSERT_GT(across, 0) << "gates between legs";
  const auto sched = routing::hybrid_inter_host(blocks(hosts, per_host), 1);
  ASSERT_TRUE(sched);
  SendLog log(n, routing::hd_layout(hosts));
  run_ranks(
      n,
      [&](Communicator& comm) {
        std::vector<int32_t> v(4096, comm.rank());
        CollectiveOptions o;
        o.algorithm = Algorithm::kHybrid;
        ASSERT_TRUE(comm.allreduce(v.data(), v.data(), v.size(), DataType::kI32, ReduceOp::kSum, o));
        EXPECT_EQ(v[4095], n * (n - 1) / 2);
      },
      [&](CommConfig& c) {
        on_hosts(per_host, plan)(c);
        c.transport = "loopback";
        c.trace = [&](int rank, const TraceEvent& e) { log.trace(rank, e); };
      });
  log.expect_order(*gates, *sched);
}

// kAuto under a hybrid plan: butterfly below the rule's HD threshold,
// hybrid (gated: one token per gate) from it, where the rule alone would
// run ring.
TEST(HybridRoundsAuto, AutoRunsHybridFromTheHdThreshold) {
  const int hosts = 2, per_host = 2, n = hosts * per_host;
  const routing::RoutePlan plan = hybrid_route_plan(hosts, per_host, 1, 1);
  auto gates = routing::plan_gates(plan);
  ASSERT_TRUE(gates && !gates->empty());
  for (const auto& [count, phase] : {std::pair<size_t, std::string>{15, "butterfly"}, {4099, "hybrid-rs"}}) {
    std::atomic<int> tokens{0};
    std::mutex mu;
    std::set<std::string> phases;
    run_ranks(
        n,
        [&](Communicator& comm) {
          std::vector<int32_t> v(count);
          for (size_t i = 0; i < count; ++i) v[i] = comm.rank() + static_cast<int32_t>(i % 13);
          Status s = comm.allreduce(v.data(), v.data(), count, DataType::kI32, ReduceOp::kSum);  // kAuto
          ASSERT_TRUE(s) << s.to_string();
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(v[i], n * (n - 1) / 2 + n * static_cast<int32_t>(i % 13)) << "element " << i;
          }
        },
        [&](CommConfig& c) {
          on_hosts(per_host, plan)(c);
          c.transport = "loopback";
          c.selection.rules = {{"*", INT_MAX, 64, 1024}};  // ring from 1 KiB without a plan
          c.trace = [&](int rank, const TraceEvent& e) {
            if (e.kind == TraceEvent::kSend && e.bytes == 0) ++tokens;
            std::lock_guard<std::mutex> l(mu);
            if (rank == 1 && e.kind == TraceEvent::kStep) phases.emplace(e.phase);
          };
        });
    EXPECT_EQ(phases.count(phase), 1u) << count << " elements";
    EXPECT_EQ(tokens.load(), phase == "hybrid-rs" ? static_cast<int>(gates->size()) : 0) << count << " elements";
  }
}

// Creates the n communicators of `plan` with host names host_of_rank(r) at
// once (a hybrid plan is checked once every host name is known); rank 0's
// status.
Status create_all(int n, const routing::RoutePlan& plan, const std::function<std::string(int)>& host_of_rank) {
  MemoryStore store;
  std::vector<Status> status(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      CommConfig c;
      c.rank = r;
      c.size = n;
      c.transport = "loopback";
      c.host = host_of_rank(r);
      c.plan = plan;
      c.timeout = 20s;
      status[static_cast<size_t>(r)] = Communicator::create(c, store).status();
    });
  }
  for (auto& t : threads) t.join();
  return status[0];
}

TEST(HybridPlanSetup, AFlowInsideAHostIsRefusedNamingIt) {
  routing::RoutePlan plan = hybrid_route_plan(2, 2, 1, 1);
  plan.flows[0].src_rank = 0;
  plan.flows[0].dst_rank = 1;
  const Status s = create_all(4, plan, [](int r) { return host_name(r / 2); });
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("route plan: flow 0 -> 1 is not an inter-host flow of hybrid allreduce on this "
                             "communicator's 2 hosts of 2 ranks (rank 0 is local rank 0 on the host of rank 0, rank 1 "
                             "is local rank 1 on the host of rank 0;"),
            std::string::npos)
      << s.message();
}

// The plan groups ranks {0, 1}, {2, 3}; hosts named round robin group them
// {0, 2}, {1, 3}: the library would send 0 -> 1, the plan routes 0 -> 2.
TEST(HybridPlanSetup, HostsThatGroupRanksOtherwiseThanThePlanAreRefused) {
  const routing::RoutePlan plan = hybrid_route_plan(2, 2, 1, 1);
  const Status s = create_all(4, plan, [](int r) { return host_name(r % 2); });
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("is not an inter-host flow of hybrid allreduce"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rank 2 is local rank 1 on the host of rank 0"), std::string::npos) << s.message();
}

TEST(HybridPlanSetup, UnequalHostsAreRefused) {
  const routing::RoutePlan plan = hybrid_route_plan(2, 2, 1, 1);
  const Status s = create_all(4, plan, [](int r) { return host_name(r == 0 ? 0 : 1); });
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("needs the same number of ranks on every host"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace weft::coll::testing
