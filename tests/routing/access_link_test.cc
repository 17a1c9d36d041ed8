// A NIC whose access link (NIC - leaf) is down has no route, whatever the
// source port: every router and the planner refuse a job that needs it, with
// one line naming the rank, the NIC and its switch, and a plan made before
// the link failed no longer checks.
#include <gtest/gtest.h>

#include <string>

#include "weft/routing/link_load.h"
#include "weft/routing/paths.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

struct AccessCase {
  Collective coll;
  int down_rank;     // the rank whose NIC's access link fails
  int hosts_per_leaf;
};

struct AccessFabric {
  topo::Fabric f;
  ranking::RankOrder order;
  int nic = -1;  // the NIC whose access link is down
};

AccessFabric access_fabric(const AccessCase& c) {
  AccessFabric x{topo::build_clos2({.spines = 3, .leaves = 3, .hosts_per_leaf = c.hosts_per_leaf}).value(), {}};
  x.order = ranking::rank(x.f, ranking::allocation_all(x.f), ranking::RankAlgo::kClos).value();
  x.nic = x.order.nics[static_cast<size_t>(c.down_rank)];
  return x;
}

void take_down(AccessFabric& x) { x.f.links[static_cast<size_t>(x.f.nic_link(x.nic))].state = topo::LinkState::kDown; }

std::string down_text(const AccessFabric& x) {
  return x.f.nic_qualified_name(x.nic) + "'s link to '" +
         x.f.switches[static_cast<size_t>(x.f.nic_switch(x.nic))].name + "' is down";
}

// Every schedule here has a flow out of or into every rank, so each router
// meets the failed NIC; the message names it (rank and NIC) and the cure.
void expect_refused(const Status& st, const AccessFabric& x, int rank) {
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  const std::string& m = st.message();
  EXPECT_NE(m.find(down_text(x)), std::string::npos) << m;
  EXPECT_NE(m.find("rank " + std::to_string(rank) + " (" + x.f.nic_qualified_name(x.nic) + ")"), std::string::npos) << m;
  EXPECT_NE(m.find("leave that NIC out of the job"), std::string::npos) << m;
}

class AccessLinkDown : public ::testing::TestWithParam<AccessCase> {};

TEST_P(AccessLinkDown, ThePlannerRefusesTheJobNamingTheRankAndItsNic) {
  AccessFabric x = access_fabric(GetParam());
  take_down(x);
  auto s = build_schedule(GetParam().coll, x.order.size(), 1000).value();
  auto table = make_model_path_table(x.f, make_hash("crc32", 5).value());
  auto planned = plan_routes(x.f, x.order, s, *table, {});
  ASSERT_FALSE(planned);
  expect_refused(planned.status(), x, GetParam().down_rank);
}

TEST_P(AccessLinkDown, TheIdealAndEcmpRoutersRefuseToRouteOverIt) {
  AccessFabric x = access_fabric(GetParam());
  take_down(x);
  auto s = build_schedule(GetParam().coll, x.order.size(), 1000).value();
  auto ideal = make_ideal_router(x.f, x.order);
  auto a = check_link_load(x.f, x.order, s, *ideal);
  ASSERT_FALSE(a);
  expect_refused(a.status(), x, GetParam().down_rank);
  auto ecmp = make_ecmp_router(x.f, x.order, {.seed = 3}).value();
  auto b = check_link_load(x.f, x.order, s, *ecmp);
  ASSERT_FALSE(b);
  expect_refused(b.status(), x, GetParam().down_rank);
}

TEST_P(AccessLinkDown, APlanMadeBeforeTheLinkFailedNoLongerReplays) {
  AccessFabric x = access_fabric(GetParam());
  auto s = build_schedule(GetParam().coll, x.order.size(), 1000).value();
  auto planner_table = make_model_path_table(x.f, make_hash("crc32", 5).value());
  auto planned = plan_routes(x.f, x.order, s, *planner_table, {});
  ASSERT_TRUE(planned) << planned.status().message();
  take_down(x);
  auto replay = make_plan_router(x.f, x.order, planned->plan);
  ASSERT_FALSE(replay);
  expect_refused(replay.status(), x, GetParam().down_rank);
  EXPECT_EQ(replay.status().message().rfind("plan flow ", 0), 0u) << replay.status().message();
  // The fabric's own hash of the plan's ports likewise.
  auto table = make_model_path_table(x.f, make_hash("crc32", 5).value());
  auto hashed = make_table_router(x.f, x.order, planned->plan, *table);
  ASSERT_FALSE(hashed);
  expect_refused(hashed.status(), x, GetParam().down_rank);
}

TEST_P(AccessLinkDown, TheCrossbarBoundRefusesItToo) {
  AccessFabric x = access_fabric(GetParam());
  take_down(x);
  auto s = build_schedule(GetParam().coll, x.order.size(), 1000).value();
  auto crossbar = make_crossbar_router(x.f, x.order);
  auto rep = check_link_load(x.f, x.order, s, *crossbar);
  ASSERT_FALSE(rep);
  expect_refused(rep.status(), x, GetParam().down_rank);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AccessLinkDown,
    ::testing::Values(AccessCase{Collective::kAllreduceHd, 0, 4}, AccessCase{Collective::kAllreduceHd, 11, 4},
                      AccessCase{Collective::kAllreduceRing, 5, 4}, AccessCase{Collective::kAllreduceRing, 0, 3},
                      AccessCase{Collective::kAllreduceHd, 4, 3}),
    [](const auto& p) {
      return std::string(p.param.coll == Collective::kAllreduceHd ? "hd" : "ring") + "_rank" +
             std::to_string(p.param.down_rank) + "_of_" + std::to_string(3 * p.param.hosts_per_leaf);
    });

TEST(AccessLinkPath, AnExplicitPathOverADownAccessLinkIsRefusedNamingIt) {
  AccessFabric x = access_fabric({Collective::kAllreduceHd, 0, 2});
  take_down(x);
  PathFinder pf(x.f);
  const int other = x.order.nics[3];  // on leaf 2
  const int via[3] = {x.f.nic_switch(x.nic), *x.f.find_switch("s2"), x.f.nic_switch(other)};
  const int back[3] = {via[2], via[1], via[0]};
  auto q = pf.route_via(other, x.nic, back);
  ASSERT_FALSE(q);
  EXPECT_EQ(q.status().message(), "path for " + x.f.nic_qualified_name(other) + " -> " +
                                      x.f.nic_qualified_name(x.nic) + ": " + down_text(x));
  auto r = pf.route_via(x.nic, other, via);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), "path for " + x.f.nic_qualified_name(x.nic) + " -> " +
                                      x.f.nic_qualified_name(other) + ": " + down_text(x));
  // The same NICs with the link up route: the refusal is the link's.
  x.f.links[static_cast<size_t>(x.f.nic_link(x.nic))].state = topo::LinkState::kUp;
  EXPECT_TRUE(pf.route_via(x.nic, other, via));
}

}  // namespace
}  // namespace weft::routing
