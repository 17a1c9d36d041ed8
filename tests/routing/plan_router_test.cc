// The routers that replay a route plan (plan_router.h): the planned switch
// path or the path table's answer for each flow's ports, served to the
// link-load checker step by step; a flow the schedule has and the plan
// lacks, a rank outside the plan and a host where the order does not run
// the rank are refused with the flow named.
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "weft/routing/link_load.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

struct Planned {
  topo::Fabric f;
  ranking::RankOrder order;
  Schedule s;
  RoutePlan plan;
};

// HD on an awkward 2-tier Clos (3 spines, 5 leaves of 3 hosts: 15 ranks,
// with a fold), planned on the hash model.
Planned planned(Collective c = Collective::kAllreduceHd) {
  Planned p{*topo::build_clos2({.spines = 3, .leaves = 5, .hosts_per_leaf = 3}), {}, {}, {}};
  p.order = *ranking::rank(p.f, ranking::allocation_all(p.f), ranking::RankAlgo::kClos);
  p.s = *build_schedule(c, p.order.size(), 1 << 16);
  auto table = make_model_path_table(p.f, *make_hash("crc32", 7), 7);
  auto r = plan_routes(p.f, p.order, p.s, *table, {});
  EXPECT_TRUE(r) << r.status().message();
  p.plan = std::move(r->plan);
  return p;
}

enum class Kind { kPlan, kTable };
std::string kind_name(const ::testing::TestParamInfo<Kind>& i) { return i.param == Kind::kPlan ? "plan" : "table"; }

class PlanRouters : public ::testing::TestWithParam<Kind> {
 protected:
  Result<std::unique_ptr<Router>> router(const Planned& p) {
    if (GetParam() == Kind::kPlan) return make_plan_router(p.f, p.order, p.plan);
    table_ = make_model_path_table(p.f, *make_hash("crc32", 7), 7);
    return make_table_router(p.f, p.order, p.plan, *table_);
  }
  std::unique_ptr<PathTable> table_;
};

// Every step's paths are the ones the plan's switches name, flow by flow in
// the step's order (the plan lists flows in another order), and the checker
// over them gives the plan's own loads.
TEST_P(PlanRouters, ServeEachStepsFlowsThePlannedPathInTheStepsOrder) {
  for (Collective c : {Collective::kAllreduceHd, Collective::kAllreduceRing}) {
    const Planned p = planned(c);
    auto r = router(p);
    ASSERT_TRUE(r) << r.status().message();
    PathFinder pf(p.f);
    for (size_t si = 0; si < p.s.steps.size(); ++si) {
      const Step& st = p.s.steps[si];
      std::vector<Path> paths(st.flows.size());
      ASSERT_TRUE((*r)->route_step(st, static_cast<int>(si), paths));
      for (size_t i = 0; i < st.flows.size(); ++i) {
        const auto it = std::find_if(p.plan.flows.begin(), p.plan.flows.end(), [&](const PlanFlow& fl) {
          return fl.src_rank == st.flows[i].src && fl.dst_rank == st.flows[i].dst;
        });
        ASSERT_NE(it, p.plan.flows.end());
        std::vector<int> sw;
        for (const auto& name : it->path) sw.push_back(*p.f.find_switch(name));
        const int s = p.order.nics[static_cast<size_t>(it->src_rank)], d = p.order.nics[static_cast<size_t>(it->dst_rank)];
        EXPECT_EQ(paths[i], *pf.route_via(s, d, sw)) << "step " << si << " flow " << i;
      }
    }
    auto rep = check_link_load(p.f, p.order, p.s, **r);
    ASSERT_TRUE(rep);
    ASSERT_EQ(rep->steps.size(), p.plan.steps.size());
    for (size_t si = 0; si < rep->steps.size(); ++si) EXPECT_EQ(rep->steps[si].max_load, p.plan.steps[si].max_load);
  }
}

TEST_P(PlanRouters, AFlowThePlanLacksIsNamedWithItsStep) {
  Planned p = planned();
  // HD's first step is rank r <-> r ^ 1 (schedule.h): drop 3 -> 2.
  std::erase_if(p.plan.flows, [](const PlanFlow& fl) { return fl.src_rank == 3 && fl.dst_rank == 2; });
  auto r = router(p);
  ASSERT_TRUE(r) << r.status().message();
  std::vector<Path> paths;
  Status missing = ok_status();
  for (size_t si = 0; si < p.s.steps.size() && missing; ++si) {
    paths.resize(p.s.steps[si].flows.size());
    missing = (*r)->route_step(p.s.steps[si], static_cast<int>(si), paths);
  }
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("the plan has no flow 3 -> 2 (step "), std::string::npos) << missing.message();
}

TEST_P(PlanRouters, AFlowOfAnotherConnectionOrQpIsNotTheOneAsked) {
  Planned p = planned();
  for (auto& fl : p.plan.flows) {
    if (fl.src_rank == 3 && fl.dst_rank == 2) fl.qp = 1;
  }
  auto r = router(p);
  ASSERT_TRUE(r) << r.status().message();
  // A step with flow 3 -> 2 on QP 0, which the plan now has on QP 1 only.
  Step st;
  st.flows.push_back(Flow{.src = 3, .dst = 2});
  std::vector<Path> paths(1);
  const Status s = (*r)->route_step(st, 4, paths);
  EXPECT_EQ(s.message(), "the plan has no flow 3 -> 2 (step 4)");
  st.flows[0].qp = 2;
  EXPECT_EQ((*r)->route_step(st, 4, paths).message(), "the plan has no flow 3 -> 2 conn 0 qp 2 (step 4)");
  st.flows[0].qp = 1;
  EXPECT_TRUE((*r)->route_step(st, 4, paths));
  EXPECT_FALSE(paths[0].dlinks.empty());
}

TEST_P(PlanRouters, ARankOutsideThePlanIsRefused) {
  for (int bad : {-1, 15, 16}) {
    Planned p = planned();
    p.plan.flows[5].dst_rank = bad;
    auto r = router(p);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(fmt::format("-> {} names a rank outside 0-14", bad)), std::string::npos)
        << r.status().message();
  }
}

TEST_P(PlanRouters, AHostWhereTheOrderDoesNotRunTheRankIsRefused) {
  Planned p = planned();
  p.plan.flows[0].src_host = "h9-9";
  auto r = router(p);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), "plan flow source rank 0 is on 'h9-9:eth0' but the rank order runs it on 'h1-1:eth0'");
}

INSTANTIATE_TEST_SUITE_P(Both, PlanRouters, ::testing::Values(Kind::kPlan, Kind::kTable), kind_name);

}  // namespace
}  // namespace weft::routing
