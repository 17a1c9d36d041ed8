// Rounds (docs/route-plan.md "Rounds"): copying a plan's rounds onto a
// schedule, the checker counting load per (step, round), and the simulator
// running a step's rounds one after another — on cases worked out by hand.
#include <gtest/gtest.h>

#include <array>

#include <fmt/format.h>

#include "weft/ranking/rank_order.h"
#include "weft/routing/link_load.h"
#include "weft/routing/plan.h"
#include "weft/routing/simulator.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

const Flow* find_flow(const Step& st, int src, int dst) {
  for (const Flow& fl : st.flows) {
    if (fl.src == src && fl.dst == dst) return &fl;
  }
  return nullptr;
}

PlanFlow plan_flow(int src, int dst, std::vector<int> steps, std::vector<int> rounds) {
  PlanFlow f;
  f.src_rank = src, f.dst_rank = dst;
  f.steps = std::move(steps), f.rounds = std::move(rounds);
  return f;
}

TEST(ApplyPlanRounds, CopiesEachFlowsRoundIntoItsStepsAndZeroesTheRest) {
  auto s = build_schedule(Collective::kAllreduceHd, 4, 8, 4);
  ASSERT_TRUE(s);
  ASSERT_EQ(s->steps.size(), 4u);  // rs d=1, rs d=2, ag d=2, ag d=1
  s->steps[0].flows[0].round = 5;  // stale: must be cleared
  RoutePlan p;
  p.ranks = 4;
  p.flows = {plan_flow(0, 2, {1, 2}, {1, 0}), plan_flow(2, 0, {1, 2}, {0, 1}), plan_flow(1, 3, {1, 2}, {})};
  ASSERT_TRUE(apply_plan_rounds(p, *s));
  EXPECT_EQ(find_flow(s->steps[1], 0, 2)->round, 1);
  EXPECT_EQ(find_flow(s->steps[2], 0, 2)->round, 0);
  EXPECT_EQ(find_flow(s->steps[1], 2, 0)->round, 0);
  EXPECT_EQ(find_flow(s->steps[2], 2, 0)->round, 1);
  EXPECT_EQ(find_flow(s->steps[1], 1, 3)->round, 0);
  for (const Flow& fl : s->steps[0].flows) EXPECT_EQ(fl.round, 0);
}

TEST(ApplyPlanRounds, NamesAFlowWhoseStepIsNotInTheSchedule) {
  auto s = build_schedule(Collective::kAllreduceHd, 4, 8, 4);
  ASSERT_TRUE(s);
  RoutePlan p;
  p.ranks = 4;
  p.flows = {plan_flow(0, 1, {0, 3}, {0, 0}), plan_flow(0, 2, {1, 7}, {1, 1})};
  auto st = apply_plan_rounds(p, *s);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "plan flow 1 (rank 0 -> 2) lists step 7, but the schedule has 4 steps");
  p.flows = {plan_flow(0, 3, {1}, {1})};
  st = apply_plan_rounds(p, *s);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "plan flow 0 (rank 0 -> 3) lists step 1 (rs), which has no such flow");
}

TEST(ApplyPlanRounds, RefusesAScheduleFlowFromARankOutsideTheSchedule) {
  RoutePlan p;
  p.ranks = 4;
  p.flows = {plan_flow(0, 2, {1}, {1})};
  for (int bad : {-1, 4, 1 << 30}) {
    auto s = build_schedule(Collective::kAllreduceHd, 4, 8, 4);
    ASSERT_TRUE(s);
    s->steps[2].flows[1].src = bad;
    const Status st = apply_plan_rounds(p, *s);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(st.message(), fmt::format("step 2 (ag) has a flow from rank {}, not a rank of the schedule's 4", bad));
  }
}

// 1 spine, 2 leaves, 2 hosts each, HD over the 4 hosts of 8 elements:
// the distance-2 steps send both hosts of l1 over its one uplink.
struct OneSpine {
  Result<topo::Fabric> f = topo::build_clos2({.spines = 1, .leaves = 2, .hosts_per_leaf = 2});
  ranking::RankOrder order{f ? ranking::allocation_all(*f) : std::vector<int>{}};
  Result<Schedule> sched = build_schedule(Collective::kAllreduceHd, 4, 8, 4);
};

TEST(LinkLoadRounds, TwoFlowsOnOneUplinkInTwoRoundsAreLoadOne) {
  // 1 spine, 2 leaves, 2 hosts each (link_load_test's load-2 case): the
  // distance-2 step sends both hosts of l1 over l1 -> s1. In rounds 0 and 1
  // (and the two flows back likewise) no link carries two flows at once.
  OneSpine c;
  ASSERT_TRUE(c.f && c.sched);
  auto& f = c.f;
  auto& order = c.order;
  auto& sched = c.sched;
  for (int si : {1, 2}) {  // rs and ag at distance 2
    for (Flow& fl : sched->steps[static_cast<size_t>(si)].flows) fl.round = fl.src % 2;
  }
  auto router = make_ideal_router(*f, order);
  auto rep = check_link_load(*f, order, *sched, *router, {.keep_per_link = true});
  ASSERT_TRUE(rep) << rep.status().message();
  const StepLoad& sl = rep->steps[1];
  EXPECT_EQ(sl.rounds, 2);
  EXPECT_EQ(sl.max_load, 1);
  EXPECT_EQ(sl.max_fabric_load, 1);
  EXPECT_EQ(sl.lower_bound, 1);
  EXPECT_EQ(sl.single_round_bound, 2) << "2 flows leave l1 over 1 uplink";
  EXPECT_EQ(sl.fabric_flows, 4);
  const int up = f->directed_from(*f->link_between(f->switch_vertex(*f->find_switch("l1")),
                                                   f->switch_vertex(*f->find_switch("s1"))),
                                  f->switch_vertex(*f->find_switch("l1")));
  EXPECT_EQ(sl.load[static_cast<size_t>(up)], 1);
  EXPECT_EQ(sl.bytes[static_cast<size_t>(up)], 16u) << "bytes add up over the rounds: 2 flows x 2 elements x 4 bytes";
  EXPECT_EQ(rep->steps[0].rounds, 1);
  EXPECT_EQ(rep->max_rounds, 2);
  EXPECT_EQ(rep->max_load, 1);
}

TEST(LinkLoadRounds, RejectsANegativeRound) {
  OneSpine c;
  ASSERT_TRUE(c.f && c.sched);
  auto& f = c.f;
  auto& order = c.order;
  auto& sched = c.sched;
  sched->steps[1].flows[0].round = -1;
  auto router = make_ideal_router(*f, order);
  auto rep = check_link_load(*f, order, *sched, *router);
  ASSERT_FALSE(rep);
  EXPECT_EQ(rep.status().message(), "step 1: rank 0 -> 2 has round -1");
}

// The failed-link fabric of `weft demo --fail 2:3`: 4 spines x 4 leaves x 4
// hosts at 200 Mbit/s, s2 - l3 down, ranks leaf by leaf (rank r on host
// r % 4 of leaf r / 4 + 1), HD AllReduce of 16 ranks. A hand-made routing:
// the k-th host of a leaf (k = rank % 4) crosses spine k + 1, except that a
// flow into or out of l3 takes s1, s3, s4 for k = 0, 1, 2 in round 0 and s1
// for k = 3 in round 1 (with rounds) or round 0 (without). Intact: no detour.
class FailedLinkRouter final : public Router {
 public:
  FailedLinkRouter(const topo::Fabric& f, const ranking::RankOrder& order, bool detour = true)
      : f_(f), order_(order), pf_(f), detour_(detour) {}
  std::string_view name() const override { return "failed-link"; }
  Status route_step(const Step& step, int, std::vector<Path>& paths) override {
    static constexpr std::array<int, 4> kViaL3 = {1, 3, 4, 1};
    for (size_t i = 0; i < step.flows.size(); ++i) {
      const int s = order_.nics[static_cast<size_t>(step.flows[i].src)];
      const int d = order_.nics[static_cast<size_t>(step.flows[i].dst)];
      const int ls = f_.nic_switch(s), ld = f_.nic_switch(d), k = step.flows[i].src % 4;
      std::vector<int> sw = {ls};
      if (ls != ld) {
        const auto& names = f_.switches;
        const bool l3 = detour_ && (names[static_cast<size_t>(ls)].name == "l3" || names[static_cast<size_t>(ld)].name == "l3");
        sw.push_back(*f_.find_switch(fmt::format("s{}", l3 ? kViaL3[static_cast<size_t>(k)] : k + 1)));
        sw.push_back(ld);
      }
      WEFT_ASSIGN_OR_RETURN(paths[i], pf_.route_via(s, d, sw));
    }
    return ok_status();
  }

 private:
  const topo::Fabric& f_;
  const ranking::RankOrder& order_;
  PathFinder pf_;
  bool detour_;
};

struct FailedLinkCase {
  topo::Fabric fabric;
  ranking::RankOrder order;
  Schedule sched;
};

FailedLinkCase failed_link_case(bool fail, bool rounds) {
  auto f = topo::build_clos2({.spines = 4, .leaves = 4, .hosts_per_leaf = 4, .fabric_gbps = 0.2, .access_gbps = 0.2});
  EXPECT_TRUE(f);
  if (fail) {
    auto l = f->link_between(f->switch_vertex(*f->find_switch("s2")), f->switch_vertex(*f->find_switch("l3")));
    f->links[static_cast<size_t>(*l)].state = topo::LinkState::kDown;
    EXPECT_TRUE(f->finalize());
  }
  ranking::RankOrder order{ranking::allocation_all(*f)};
  auto sched = build_schedule(Collective::kAllreduceHd, 16, 1 << 20, 4);
  EXPECT_TRUE(sched);
  for (Step& st : sched->steps) {
    for (Flow& fl : st.flows) {
      const bool l3 = fl.src / 4 == 2 || fl.dst / 4 == 2;
      fl.round = rounds && l3 && fl.src / 4 != fl.dst / 4 && fl.src % 4 == 3 ? 1 : 0;
    }
  }
  return {std::move(*f), std::move(order), std::move(*sched)};
}

TEST(LinkLoadRounds, FailedLinkFabricHasLoadOneInEveryRound) {
  FailedLinkCase c = failed_link_case(true, true);
  FailedLinkRouter router(c.fabric, c.order);
  auto rep = check_link_load(c.fabric, c.order, c.sched, router);
  ASSERT_TRUE(rep) << rep.status().message();
  ASSERT_EQ(rep->steps.size(), 8u);  // rs d=1 2 4 8, ag d=8 4 2 1
  for (const StepLoad& sl : rep->steps) {
    const bool far = sl.distance >= 4;  // the steps that leave the leaf
    EXPECT_EQ(sl.max_load, 1) << "step " << sl.step;
    EXPECT_EQ(sl.lower_bound, 1) << "step " << sl.step;
    EXPECT_EQ(sl.rounds, far ? 2 : 1) << "step " << sl.step;
    // Without rounds: 4 flows leave l3 over its 3 live uplinks.
    EXPECT_EQ(sl.single_round_bound, far ? 2 : 1) << "step " << sl.step;
  }
  EXPECT_EQ(rep->max_load, 1);
  EXPECT_EQ(rep->max_rounds, 2);

  FailedLinkCase one = failed_link_case(true, false);
  auto shared = check_link_load(one.fabric, one.order, one.sched, router);
  ASSERT_TRUE(shared);
  EXPECT_EQ(shared->max_load, 2) << "without rounds s1 carries two of l3's flows at once";
  EXPECT_EQ(shared->max_lower_bound, 2);
}

TEST(SimulatorRounds, FailedLinkFabricRunsAtFiveSixthsOfTheIntactOne) {
  // Each rank holds B = 4 MiB. HD sends B/2, B/4, B/8, B/16 per rank in rs
  // and the same in ag; at load 1 a step takes its bytes / c (c = 200 Mbit/s),
  // so intact: t = 2 (15/16) B / c and busbw = (B / t) 2 (15/16) = c = 200.
  // With s2 - l3 down the d=4 and d=8 steps run in 2 rounds, each round as
  // long as the step was: t' = (2 (B/2 + B/4) + 2 * 2 (B/8 + B/16)) / c
  // = (3/2 + 3/4) B / c = 9/4 B / c against 15/8 B / c, so busbw' =
  // c (15/8) / (9/4) = 5/6 c = 166.7 Mbit/s.
  const uint64_t bytes = 4u << 20;
  FailedLinkCase intact = failed_link_case(false, false);
  FailedLinkRouter intact_router(intact.fabric, intact.order, false);
  auto a = simulate(intact.fabric, intact.order, intact.sched, intact_router, {.hop_latency_s = 0});
  ASSERT_TRUE(a) << a.status().message();
  const double c = 0.2e9 / 8;
  EXPECT_NEAR(allreduce_busbw(bytes, 16, a->seconds), c, 1e-9 * c);

  FailedLinkCase failed = failed_link_case(true, true);
  FailedLinkRouter router(failed.fabric, failed.order);
  auto b = simulate(failed.fabric, failed.order, failed.sched, router, {.hop_latency_s = 0});
  ASSERT_TRUE(b) << b.status().message();
  EXPECT_NEAR(allreduce_busbw(bytes, 16, b->seconds), c * 5 / 6, 1e-9 * c);
  EXPECT_NEAR(allreduce_busbw(bytes, 16, b->seconds) * 8 / 1e6, 166.67, 0.01);
  for (const SimStep& ss : b->steps) {
    EXPECT_EQ(ss.rounds, ss.step >= 2 && ss.step <= 5 ? 2 : 1) << "step " << ss.step;
    EXPECT_EQ(ss.max_load, 1) << "step " << ss.step;
  }
  // The same routing without rounds shares s1's links two ways: in the fluid
  // model that costs exactly what the second round does.
  FailedLinkCase one = failed_link_case(true, false);
  auto shared = simulate(one.fabric, one.order, one.sched, router, {.hop_latency_s = 0});
  ASSERT_TRUE(shared);
  EXPECT_NEAR(shared->seconds, b->seconds, 1e-9 * b->seconds);
  EXPECT_EQ(shared->steps[2].max_load, 2);

  // Per-hop latency is paid once per round: 2 links inside a leaf, 4 across.
  auto lat = simulate(failed.fabric, failed.order, failed.sched, router, {.hop_latency_s = 1e-3});
  ASSERT_TRUE(lat);
  EXPECT_NEAR(lat->seconds - b->seconds, 1e-3 * (4 * 2 + 4 * 2 * 4), 1e-9);
}

}  // namespace
}  // namespace weft::routing
