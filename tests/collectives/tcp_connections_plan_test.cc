// Several TCP connections per pair under a route plan (`weft route
// --qps-per-connection Q`, connections_per_peer = Q): connection c of a
// pair leaves from the planned port of the pair's flow with conn = c and
// goes to the planned listen port; results exact, also for messages large
// enough to be striped over all Q connections. Mismatches refused.
#include <atomic>
#include <cstdint>
#include <string>

#include "harness.h"
#include "planner_plans.h"
#include "tcp/tcp_transport.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

const routing::PlanFlow* flow(const routing::RoutePlan& plan, int src, int dst, int conn) {
  for (const routing::PlanFlow& f : plan.flows) {
    if (f.src_rank == src && f.dst_rank == dst && f.conn == conn) return &f;
  }
  return nullptr;
}

// Q set by the caller, or left at 1 (as the C API and torch do) and taken
// from the plan.
class TcpPlannedConnections : public ::testing::TestWithParam<bool> {};

TEST_P(TcpPlannedConnections, EveryConnectionLeavesFromItsPlannedPort) {
  const int n = 4, q = 4;
  const bool explicit_q = GetParam();
  const routing::RoutePlan plan = on_free_tcp_ports(hd_connections_plan(n, q));
  ASSERT_EQ(plan.flows.front().protocol, "tcp") << "no free ports";
  ASSERT_EQ(plan.flows.size(), static_cast<size_t>(q * n * 2)) << "HD on 4 ranks: 2 partners per rank, 4 connections each";
  std::atomic<int> checked{0};
  run_ranks(
      n,
      [&](Communicator& comm) {
        // 300001 x 4 B: HD's first halves (600 KB) are striped over the 4
        // connections (>= 256 KiB); 1003 rides connection 0.
        for (size_t count : {size_t{1003}, size_t{300001}}) {
          std::vector<int32_t> v(count);
          for (size_t i = 0; i < count; ++i) v[i] = comm.rank() * 1000 + static_cast<int32_t>(i % 97);
          CollectiveOptions o;
          o.algorithm = Algorithm::kHalvingDoubling;
          Status s = comm.allreduce(v.data(), v.data(), count, DataType::kI32, ReduceOp::kSum, o);
          ASSERT_TRUE(s) << s.to_string();
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(v[i], 1000 * n * (n - 1) / 2 + n * static_cast<int32_t>(i % 97)) << "element " << i;
          }
        }
        const int me = comm.rank();
        for (int p = 0; p < n; ++p) {
          auto* info = p == me ? nullptr : dynamic_cast<tcp::TcpTransportInfo*>(comm.transport_for(p));
          if (info == nullptr) continue;
          int out = 0, in = 0;  // connection index within each direction
          for (const auto& c : info->connection_ports(p)) {
            const int conn = c.outgoing ? out++ : in++;
            const routing::PlanFlow* f = c.outgoing ? flow(plan, me, p, conn) : flow(plan, p, me, conn);
            if (f == nullptr) continue;  // not a pair of the plan
            EXPECT_EQ(c.local_port, c.outgoing ? f->sport : f->dport)
                << "rank " << me << (c.outgoing ? " to " : " from ") << "rank " << p << " connection " << conn;
            EXPECT_EQ(c.remote_port, c.outgoing ? f->dport : f->sport)
                << "rank " << me << (c.outgoing ? " to " : " from ") << "rank " << p << " connection " << conn;
            ++checked;
          }
        }
      },
      [&](CommConfig& c) {
        c.transport = "tcp";
        c.host = host_name(c.rank);
        c.plan = plan;
        if (explicit_q) c.tcp.connections_per_peer = q;
        c.timeout = 60s;
      });
  EXPECT_EQ(checked.load(), 2 * static_cast<int>(plan.flows.size())) << "both ends of every planned connection";
}

INSTANTIATE_TEST_SUITE_P(Q, TcpPlannedConnections, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "Set" : "FromThePlan"; });

Status create_with(const routing::RoutePlan& plan, int per_peer) {
  MemoryStore store;
  CommConfig c;
  c.rank = 0;
  c.size = plan.ranks;
  c.transport = "tcp";
  c.plan = plan;
  c.tcp.connections_per_peer = per_peer;
  return Communicator::create(c, store).status();
}

TEST(TcpPlannedConnectionsRefused, APlanAndConnectionsPerPeerThatDifferAreRefusedNamingBoth) {
  const routing::RoutePlan four = hd_connections_plan(4, 4);
  EXPECT_EQ(create_with(four, 2).message(),
            "communicator: the route plan has 4 TCP connections per directed pair, connections_per_peer is 2: they "
            "must be equal");
  EXPECT_EQ(create_with(hd_connections_plan(4, 1), 3).message(),
            "communicator: the route plan has 1 TCP connection per directed pair, connections_per_peer is 3: they "
            "must be equal");
  routing::RoutePlan gap = four;
  for (routing::PlanFlow& f : gap.flows) {
    if (f.src_rank == 0 && f.dst_rank == 1 && f.conn == 2) f.conn = 5;
  }
  EXPECT_EQ(create_with(gap, 4).message(),
            "communicator: the route plan's flows 0 -> 1 are connections 0, 1, 3, 5; every pair needs connections "
            "0..Q-1, the same Q for all");
}

}  // namespace
}  // namespace weft::coll::testing
