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

// HD (or ring) on an awkward 2-tier Clos (3 spines, 5 leaves of 3 hosts: 15
// ranks, so HD folds), planned on the hash model.
void plan_into(Planned& p, Collective c = Collective::kAllreduceHd) {
  p.f = *topo::build_clos2({.spines = 3, .leaves = 5, .hosts_per_leaf = 3});
  p.order = *ranking::rank(p.f, ranking::allocation_all(p.f), ranking::RankAlgo::kClos);
  p.s = *build_schedule(c, p.order.size(), 1 << 16);
  auto table = make_model_path_table(p.f, *make_hash("crc32", 7), 7);
  auto r = plan_routes(p.f, p.order, p.s, *table, {});
  ASSERT_TRUE(r) << r.status().message();
  p.plan = std::move(r->plan);
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
    Planned p;
    ASSERT_NO_FATAL_FAILURE(plan_into(p, c));
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
  Planned p;
  ASSERT_NO_FATAL_FAILURE(plan_into(p));
  // 15 ranks: step 0 folds rank 2i into 2i + 1 (i < 7), steps 1-6 are
  // halving-doubling among the odd ranks and 14, step 7 unfolds 2i + 1 to
  // 2i (routing/schedule.cc build_hd): 3 -> 2 is a flow of step 7 only.
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
  EXPECT_EQ(missing.message(), "the plan has no flow 3 -> 2 (step 7)");
}

// A flow is its ranks, connection and QP: the plan's flow 3 -> 2 moved to
// another connection or QP no longer answers for the schedule's.
TEST_P(PlanRouters, AFlowOfAnotherConnectionOrQpIsNotTheOneAsked) {
  struct Case {
    int plan_conn, plan_qp;  // the plan's flow 3 -> 2
    int conn, qp;            // the one asked
    const char* missing;     // "": found
  };
  for (const Case& c : {Case{0, 1, 0, 0, "the plan has no flow 3 -> 2 (step 4)"},
                        Case{0, 1, 0, 2, "the plan has no flow 3 -> 2 conn 0 qp 2 (step 4)"},
                        Case{0, 1, 0, 1, ""},
                        Case{1, 0, 0, 0, "the plan has no flow 3 -> 2 (step 4)"},
                        Case{1, 0, 1, 1, "the plan has no flow 3 -> 2 conn 1 qp 1 (step 4)"},
                        Case{1, 0, 1, 0, ""},
                        Case{2, 3, 2, 3, ""}}) {
    SCOPED_TRACE(::testing::Message() << "plan conn " << c.plan_conn << " qp " << c.plan_qp << ", asked conn " << c.conn
                                      << " qp " << c.qp);
    Planned p;
    ASSERT_NO_FATAL_FAILURE(plan_into(p));
    for (auto& fl : p.plan.flows) {
      if (fl.src_rank == 3 && fl.dst_rank == 2) fl.conn = c.plan_conn, fl.qp = c.plan_qp;
    }
    auto r = router(p);
    ASSERT_TRUE(r) << r.status().message();
    Step st;
    st.flows.push_back(Flow{.src = 3, .dst = 2, .conn = c.conn, .qp = c.qp});
    std::vector<Path> paths(1);
    const Status s = (*r)->route_step(st, 4, paths);
    if (*c.missing != 0) {
      EXPECT_EQ(s.message(), c.missing);
    } else {
      EXPECT_TRUE(s) << s.message();
      EXPECT_FALSE(paths[0].dlinks.empty());
    }
  }
}

TEST_P(PlanRouters, ARankOutsideThePlanIsRefused) {
  for (bool at_source : {false, true}) {
    for (int bad : {-1, 15, 16}) {
      Planned p;
      ASSERT_NO_FATAL_FAILURE(plan_into(p));
      PlanFlow& fl = p.plan.flows[5];
      (at_source ? fl.src_rank : fl.dst_rank) = bad;
      auto r = router(p);
      ASSERT_FALSE(r) << bad;
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(r.status().message(), fmt::format("plan flow 5 (rank {} -> {}) names a rank outside the plan's 15",
                                                  fl.src_rank, fl.dst_rank));
    }
  }
}

TEST_P(PlanRouters, AHostWhereTheOrderDoesNotRunTheRankIsRefused) {
  Planned p;
  ASSERT_NO_FATAL_FAILURE(plan_into(p));
  p.plan.flows[0].src_host = "h9-9";
  auto r = router(p);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), "plan flow source rank 0 is on 'h9-9:eth0' but the rank order runs it on 'h1-1:eth0'");
}

INSTANTIATE_TEST_SUITE_P(Both, PlanRouters, ::testing::Values(Kind::kPlan, Kind::kTable), kind_name);

}  // namespace
}  // namespace weft::routing
