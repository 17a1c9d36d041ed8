#include <gtest/gtest.h>

#include "weft/ranking/rank_order.h"
#include "weft/routing/link_load.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

TEST(LinkLoad, CountsTwoFlowsSharingOneUplinkAsLoadTwo) {
  // 1 spine, 2 leaves, 2 hosts each: the distance-2 HD step sends both hosts
  // of leaf 1 across the single spine — load 2 on l1 -> s1 and s1 -> l2.
  auto f = topo::build_clos2({.spines = 1, .leaves = 2, .hosts_per_leaf = 2});
  ASSERT_TRUE(f);
  ranking::RankOrder order{ranking::allocation_all(*f)};
  auto sched = build_schedule(Collective::kAllreduceHd, 4, 8, 4);
  ASSERT_TRUE(sched);
  auto router = make_ideal_router(*f, order);
  auto rep = check_link_load(*f, order, *sched, *router, {.keep_per_link = true});
  ASSERT_TRUE(rep) << rep.status().message();
  ASSERT_EQ(rep->steps.size(), 4u);
  EXPECT_EQ(rep->steps[0].max_load, 1);  // rs d=1 inside the leaves
  EXPECT_EQ(rep->steps[0].fabric_flows, 0);
  EXPECT_EQ(rep->steps[1].max_load, 2);
  EXPECT_EQ(rep->steps[1].lower_bound, 2) << "2 flows leave l1 over 1 uplink";
  EXPECT_EQ(rep->steps[1].fabric_flows, 4);
  int up = f->directed_from(*f->link_between(f->switch_vertex(*f->find_switch("l1")),
                                             f->switch_vertex(*f->find_switch("s1"))),
                            f->switch_vertex(*f->find_switch("l1")));
  EXPECT_EQ(rep->steps[1].load[static_cast<size_t>(up)], 2);
  EXPECT_EQ(rep->steps[1].bytes[static_cast<size_t>(up)], 16u) << "two flows of 2 elements x 4 bytes";
}

TEST(LinkLoad, EcmpCollidesWhereIdealDoesNot) {
  auto f = topo::build_clos2({.spines = 8, .leaves = 2, .hosts_per_leaf = 8});
  ASSERT_TRUE(f);
  ranking::RankOrder order{ranking::allocation_all(*f)};
  auto sched = build_schedule(Collective::kAllreduceHd, 16, 1 << 20, 4);
  ASSERT_TRUE(sched);
  auto ideal = make_ideal_router(*f, order);
  auto ecmp = make_ecmp_router(*f, order, {.seed = 7}).value();
  auto a = check_link_load(*f, order, *sched, *ideal);
  auto b = check_link_load(*f, order, *sched, *ecmp);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->max_load, 1);
  // 8 flows hashed onto 8 uplinks collide with probability 1 - 8!/8^8 > 99.7%.
  EXPECT_GT(b->max_load, 1);
}

TEST(LinkLoad, FailedLinkIsAvoidedAndRaisesTheBound) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 2});
  ASSERT_TRUE(f);
  auto l = f->link_between(f->switch_vertex(*f->find_switch("s1")), f->switch_vertex(*f->find_switch("l2")));
  ASSERT_TRUE(l);
  f->links[*l].state = topo::LinkState::kDown;
  ranking::RankOrder order{ranking::allocation_all(*f)};
  auto sched = build_schedule(Collective::kAllreduceHd, 4, 8, 4);
  ASSERT_TRUE(sched);
  auto router = make_ideal_router(*f, order);
  auto rep = check_link_load(*f, order, *sched, *router, {.keep_per_link = true});
  ASSERT_TRUE(rep) << rep.status().message();
  // l2 has one uplink left, and two flows enter it from above.
  EXPECT_EQ(rep->steps[1].lower_bound, 2);
  EXPECT_EQ(rep->steps[1].max_load, 2);
  EXPECT_EQ(rep->steps[1].load[static_cast<size_t>(2 * *l)], 0);
  EXPECT_EQ(rep->steps[1].load[static_cast<size_t>(2 * *l + 1)], 0);
}

// 2 pods of 4 leaves x 8 hosts, 4 aggregation switches each with 2 links
// to the cores: HD's d=32 steps send all 32 hosts of a pod to the other,
// over 8 agg-core links each way: 4 flows on the busiest at least, where
// each leaf alone (8 flows over 4 aggs) would say 2.
TEST(LinkLoad, AThreeTierPodIsBoundByItsLinksToTheCores) {
  auto f = topo::build_clos3({.pods = 2, .leaves_per_pod = 4, .aggs_per_pod = 4, .cores = 8, .hosts_per_leaf = 8});
  ASSERT_TRUE(f);
  ranking::RankOrder order{ranking::allocation_all(*f)};
  auto sched = build_schedule(Collective::kAllreduceHd, 64, 64, 4);
  ASSERT_TRUE(sched);
  auto router = make_ideal_router(*f, order);
  auto rep = check_link_load(*f, order, *sched, *router);
  ASSERT_TRUE(rep) << rep.status().message();
  for (const StepLoad& sl : rep->steps) {
    const int want = sl.distance == 32 ? 4 : sl.distance == 8 || sl.distance == 16 ? 2 : 1;
    EXPECT_EQ(sl.lower_bound, want) << sl.phase << " d=" << sl.distance;
    EXPECT_GE(sl.max_load, sl.lower_bound) << sl.phase << " d=" << sl.distance;
  }
}

TEST(LinkLoad, RejectsAnOrderOfTheWrongSize) {
  auto f = topo::build_clos2({.spines = 1, .leaves = 1, .hosts_per_leaf = 3});
  ASSERT_TRUE(f);
  ranking::RankOrder order{{0, 1}};
  auto sched = build_schedule(Collective::kAllreduceHd, 3, 8, 4);
  auto router = make_ideal_router(*f, order);
  auto rep = check_link_load(*f, order, *sched, *router);
  ASSERT_FALSE(rep);
  EXPECT_EQ(rep.status().message(), "the rank order has 2 ranks but the schedule is for 3");
}

}  // namespace
}  // namespace weft::routing
