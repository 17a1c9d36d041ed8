// Rounds cost time (rounds.h, "Rounds cost time"): the planner keeps a
// step's rounds only where they take no longer than its flows all at once.
// On oversubscribed multi-plane rail fabrics (two flows reach one port,
// planes.h; leaves with fewer uplinks than hosts) rounds over the fabric
// links alone left two flows on a port in every round, and weft's plan ran
// slower than ECMP with the same order. A 3-tier Clos with one core gives
// each pair one path: weft can only match ECMP there. Rounds that take no
// longer are kept: planner_rounds_test.cc's failed link runs 4 steps in 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>

#include "weft/routing/compare.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

struct CostShape {
  const char* name;
  topo::Fabric fabric;
  // Two flows reach one port in some step whatever its rounds (planes.h):
  // some step sharing a fabric link must run at once.
  bool multi_plane = true;
};

void PrintTo(const CostShape& s, std::ostream* o) { *o << s.name; }

class RoundsCost : public ::testing::TestWithParam<CostShape> {};

topo::Fabric multi_plane_rail(int hosts, int spines) {
  return topo::build_rail({.hosts = hosts, .nics_per_host = 2, .leaves_per_rail = 1, .spines = spines, .planes = 2})
      .value();
}

// Per step, from the plan as the library would run it (ports looked up in
// a fresh table, rounds applied): the rounds' time (each round's busiest
// link summed) and the busiest link's total, in flows at 1 Gbit/s.
TEST_P(RoundsCost, EveryStepInRoundsTakesNoLongerThanItsFlowsAllAtOnce) {
  const topo::Fabric& f = GetParam().fabric;
  auto order = ranking::rank(f, ranking::allocation_all(f), ranking::RankAlgo::kClos).value();
  auto s = build_schedule(Collective::kAllreduceHd, order.size(), 1 << 16).value();
  auto table = make_model_path_table(f, make_hash("crc32", 1).value(), 1);
  auto planned = plan_routes(f, order, s, *table, {});
  ASSERT_TRUE(planned) << planned.status().message();
  auto fresh = make_model_path_table(f, make_hash("crc32", 1).value(), 1);
  auto router = make_table_router(f, order, planned->plan, *fresh).value();
  ASSERT_TRUE(apply_plan_rounds(planned->plan, s));
  int shared_fabric_steps = 0, shared_at_once = 0;
  for (size_t si = 0; si < s.steps.size(); ++si) {
    const Step& st = s.steps[si];
    std::vector<Path> paths(st.flows.size());
    ASSERT_TRUE(router->route_step(st, static_cast<int>(si), paths));
    std::map<std::pair<int, int>, int> count;  // (directed link, round) -> flows
    std::map<int, int> fabric;                 // directed switch-to-switch link -> flows
    for (size_t i = 0; i < st.flows.size(); ++i) {
      for (int dl : paths[i].dlinks) {
        ++count[{dl, st.flows[i].round}];
        if (f.is_switch_vertex(f.directed_src(dl)) && f.is_switch_vertex(f.directed_dst(dl))) ++fabric[dl];
      }
    }
    std::map<int, double> round_time, link_total;
    for (const auto& [key, n] : count) {
      const double t = n / f.links[static_cast<size_t>(key.first / 2)].gbps;
      round_time[key.second] = std::max(round_time[key.second], t);
      link_total[key.first] += t;
    }
    double in_rounds = 0, sharing = 0;
    for (const auto& [r, t] : round_time) in_rounds += t;
    for (const auto& [dl, t] : link_total) sharing = std::max(sharing, t);
    EXPECT_LE(in_rounds, sharing * (1 + 1e-9)) << "step " << si << " in " << round_time.size() << " rounds";
    int fabric_load = 0;
    for (const auto& [dl, n] : fabric) fabric_load = std::max(fabric_load, n);
    shared_fabric_steps += fabric_load > 1;
    shared_at_once += fabric_load > 1 && round_time.size() == 1;
  }
  EXPECT_GT(shared_fabric_steps, 0) << "no step shares a fabric link: the case never asks for rounds";
  if (GetParam().multi_plane) {
    EXPECT_GT(shared_at_once, 0) << "rounds kept where two flows reach one port";
  }
}

// The simulator's verdict on the same fabrics: weft's plan is no slower than
// ECMP (b) and no faster than the ideal switch (d). Without per-hop latency:
// a round's few microseconds are not what this is about, and (b) is a mean
// of trials, so "no slower" allows its rounding.
TEST_P(RoundsCost, WeftIsNoSlowerThanLeafSetsOverEcmp) {
  const topo::Fabric& f = GetParam().fabric;
  CompareOptions opt;
  opt.bytes = 64ull << 20;
  opt.sim.hop_latency_s = 0;
  auto cmp = compare_routings(f, ranking::allocation_all(f), opt);
  ASSERT_TRUE(cmp) << cmp.status().message();
  const auto &b = cmp->cases[1], &c = cmp->cases[2], &d = cmp->cases[3];
  EXPECT_LE(c.seconds, b.seconds * (1 + 1e-9)) << "(b) " << b.seconds << " s, (c) " << c.seconds << " s";
  EXPECT_GE(c.seconds, d.seconds * (1 - 1e-9));
}

INSTANTIATE_TEST_SUITE_P(
    Fabrics, RoundsCost,
    ::testing::Values(CostShape{"RailSevenHostsOneSpineTwoPlanes", multi_plane_rail(7, 1)},
                      CostShape{"RailSevenHostsTwoSpinesTwoPlanes", multi_plane_rail(7, 2)},
                      CostShape{"RailFiveHostsOneSpineTwoPlanes", multi_plane_rail(5, 1)},
                      CostShape{"RailNineHostsFourSpinesTwoPlanes", multi_plane_rail(9, 4)},
                      CostShape{"RailThreeHostsOneSpineTwoPlanes", multi_plane_rail(3, 1)},
                      // One path per pair: neither ports nor rounds can help.
                      CostShape{"Clos3OneCore", topo::build_clos3({.pods = 2,
                                                               .leaves_per_pod = 3,
                                                               .aggs_per_pod = 1,
                                                               .cores = 1,
                                                               .hosts_per_leaf = 4})
                                                .value(),
                                        false}),
    [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace weft::routing
