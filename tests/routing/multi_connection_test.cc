// Several TCP connections per directed pair (multi_connection.h, `weft
// route --qps-per-connection`): every flow split into Q connections, and
// plans in which each connection has its own source port on its own path,
// judged by the link-load checker on the ports hashed again.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "weft/routing/link_load.h"
#include "weft/routing/multi_connection.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

TEST(WithConnections, SplitsEveryFlowIntoQConnectionsOfEqualShares) {
  const Schedule hd = build_schedule(Collective::kAllreduceHd, 6, 1003).value();
  for (int q : {1, 3, 4, 64}) {
    const Schedule s = with_connections(hd, q).value();
    ASSERT_EQ(s.steps.size(), hd.steps.size());
    for (size_t i = 0; i < hd.steps.size(); ++i) {
      const auto& flows = s.steps[i].flows;
      ASSERT_EQ(flows.size(), hd.steps[i].flows.size() * static_cast<size_t>(q)) << "step " << i << ", Q " << q;
      for (size_t k = 0; k < hd.steps[i].flows.size(); ++k) {
        const Flow& whole = hd.steps[i].flows[k];
        uint64_t sum = 0, lo = UINT64_MAX, hi = 0;
        for (int c = 0; c < q; ++c) {
          const Flow& f = flows[k * static_cast<size_t>(q) + static_cast<size_t>(c)];
          EXPECT_EQ(std::make_tuple(f.src, f.dst, f.conn, f.qp), std::make_tuple(whole.src, whole.dst, c, 0));
          sum += f.bytes, lo = std::min(lo, f.bytes), hi = std::max(hi, f.bytes);
        }
        EXPECT_EQ(sum, whole.bytes);
        EXPECT_LE(hi - lo, 1u) << "the transport stripes a message evenly";
      }
    }
  }
}

TEST(WithConnections, QOutsideOneTo64AndNcclRingAreRefused) {
  const Schedule hd = build_schedule(Collective::kAllreduceHd, 4, 16).value();
  EXPECT_EQ(with_connections(hd, 0).status().message(),
            "0 connections per directed pair: the TCP transport opens 1..64 (connections_per_peer)");
  EXPECT_EQ(with_connections(hd, 65).status().message(),
            "65 connections per directed pair: the TCP transport opens 1..64 (connections_per_peer)");
  const Schedule nccl = build_schedule(Collective::kNcclRing, 4, 16, 4, NcclRingShape{2, 2}).value();
  EXPECT_FALSE(with_connections(nccl, 2));
}

struct ConnCase {
  Collective collective;
  int ranks_per_leaf, q;
};

class MultiConnectionPlan : public ::testing::TestWithParam<ConnCase> {};

// 4 spines, 2 leaves: HD and ring with Q connections per pair; every
// connection a flow with a port of its own, distinct per source host, and
// each step's load, hashed again, what the plan says and at the bound.
TEST_P(MultiConnectionPlan, EveryConnectionHasItsOwnPortAndEveryStepIsAtTheCheckersBound) {
  const ConnCase k = GetParam();
  const topo::Fabric f = topo::build_clos2({.spines = 4, .leaves = 2, .hosts_per_leaf = k.ranks_per_leaf}).value();
  const ranking::RankOrder order = ranking::rank(f, ranking::allocation_all(f), ranking::RankAlgo::kClos).value();
  const Schedule whole = build_schedule(k.collective, order.size(), 1 << 20).value();
  const Schedule s = with_connections(whole, k.q).value();
  auto table = make_model_path_table(f, make_hash("crc32", 1).value());
  PlannerOptions opt;
  opt.protocol = "tcp";
  opt.rounds = false;
  auto planned = plan_routes(f, order, s, *table, opt);
  ASSERT_TRUE(planned) << planned.status().message();
  const RoutePlan& plan = planned->plan;
  std::set<std::pair<int, int>> pairs;
  for (const Step& st : whole.steps) {
    for (const Flow& fl : st.flows) pairs.emplace(fl.src, fl.dst);
  }
  ASSERT_EQ(plan.flows.size(), pairs.size() * static_cast<size_t>(k.q)) << "Q flows per directed pair";
  std::map<std::pair<int, int>, std::set<int>> conns;
  std::set<std::pair<std::string, int>> host_ports;
  for (const PlanFlow& pf : plan.flows) {
    EXPECT_EQ(pf.qp, 0);
    conns[{pf.src_rank, pf.dst_rank}].insert(pf.conn);
    EXPECT_TRUE(host_ports.emplace(pf.src_host, pf.sport).second) << pf.src_host << " uses port " << pf.sport << " twice";
  }
  for (const auto& [pair, c] : conns) {
    EXPECT_EQ(c.size(), static_cast<size_t>(k.q));
    EXPECT_EQ(*c.rbegin(), k.q - 1) << pair.first << " -> " << pair.second;
  }
  auto fresh = make_model_path_table(f, make_hash("crc32", 1).value());
  auto router = make_table_router(f, order, plan, *fresh);
  ASSERT_TRUE(router) << router.status().message();
  auto rep = check_link_load(f, order, s, **router);
  ASSERT_TRUE(rep) << rep.status().message();
  ASSERT_EQ(rep->steps.size(), plan.steps.size());
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    EXPECT_EQ(plan.steps[i].max_load, rep->steps[i].max_load) << "step " << i;
    EXPECT_EQ(rep->steps[i].max_load, rep->steps[i].lower_bound) << "step " << i;
    EXPECT_EQ(plan.steps[i].rounds, 1) << "a pair's connections run at once: no rounds";
  }
}

INSTANTIATE_TEST_SUITE_P(Routing, MultiConnectionPlan,
                         ::testing::Values(ConnCase{Collective::kAllreduceHd, 4, 4}, ConnCase{Collective::kAllreduceHd, 3, 2},
                                           ConnCase{Collective::kAllreduceRing, 4, 4}, ConnCase{Collective::kAllreduceHd, 8, 3}),
                         [](const ::testing::TestParamInfo<ConnCase>& p) {
                           return std::string(p.param.collective == Collective::kAllreduceHd ? "hd" : "ring") + "_" +
                                  std::to_string(2 * p.param.ranks_per_leaf) + "ranks_q" + std::to_string(p.param.q);
                         });

}  // namespace
}  // namespace weft::routing
