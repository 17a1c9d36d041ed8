// Route plans on rail-optimised and dual-plane fabrics (planner.h,
// planes.h): random partial allocations (a random subset of hosts, all their
// NICs), random failed spine links and oversubscribed rails (fewer spines
// than hosts on a rail leaf). Judged by the link-load checker over the
// plan's paths; for every fourth case also by a brute-force recount of the
// plan's own path names, which checks that every switch of a path lies on
// the source port's plane.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <random>
#include <tuple>

#include "weft/routing/hybrid_schedule.h"
#include "weft/routing/link_load.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

// Cases per (G, P, collective); fewer under a sanitiser, where every case
// is ~10x slower.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kCases = 20;
#else
constexpr int kCases = 80;
#endif

struct Shape {
  int nics;    // G: rails
  int planes;  // P
};

// One spine link down, where the leaf keeps another.
void fail_one_link(topo::Fabric& f, std::mt19937& rng) {
  std::vector<size_t> fabric;
  for (size_t l = 0; l < f.links.size(); ++l) {
    if (f.is_switch_vertex(f.links[l].a) && f.is_switch_vertex(f.links[l].b)) fabric.push_back(l);
  }
  f.links[fabric[std::uniform_int_distribution<size_t>(0, fabric.size() - 1)(rng)]].state = topo::LinkState::kDown;
}

// Per step: the max over rounds of the flows on one directed link, counted
// from the plan's host, NIC and switch names alone. Fails the test where a
// path leaves the source port's plane.
std::vector<int> recount(const topo::Fabric& f, const RoutePlan& plan, size_t steps) {
  std::map<std::tuple<int, int, std::string>, int> load;  // (step, round, link) -> flows
  for (const auto& fl : plan.flows) {
    if (fl.src_host == fl.dst_host && fl.src_nic == fl.dst_nic) {
      EXPECT_EQ(fl.path.size(), 1u);  // in-NIC: no link
      continue;
    }
    const int src = *f.find_nic(fl.src_host + ":" + fl.src_nic);
    const int dst = *f.find_nic(fl.dst_host + ":" + fl.dst_nic);
    EXPECT_EQ(f.nic_plane(src), f.nic_plane(dst)) << fl.src_rank << " -> " << fl.dst_rank;
    std::vector<std::string> hops{fl.src_host + ":" + fl.src_nic};
    for (const auto& sw : fl.path) {
      EXPECT_EQ(f.switches[static_cast<size_t>(*f.find_switch(sw))].plane, f.nic_plane(src)) << sw;
      hops.push_back(sw);
    }
    hops.push_back(fl.dst_host + ":" + fl.dst_nic);
    for (size_t k = 0; k < fl.steps.size(); ++k) {
      const int round = fl.rounds.empty() ? 0 : fl.rounds[k];
      for (size_t h = 0; h + 1 < hops.size(); ++h) ++load[{fl.steps[k], round, hops[h] + ">" + hops[h + 1]}];
    }
  }
  std::vector<int> out(steps, 0);
  for (const auto& [key, n] : load) {
    int& m = out[static_cast<size_t>(std::get<0>(key))];
    m = std::max(m, n);
  }
  return out;
}

class RailPlanePlans : public ::testing::TestWithParam<std::tuple<Shape, Collective>> {};

TEST_P(RailPlanePlans, RandomAllocationsFailuresAndOversubscriptionStayAtTheBoundOnOnePlane) {
  const auto [shape, coll] = GetParam();
  std::mt19937 rng(7000u + 97u * static_cast<uint32_t>(shape.nics) + 13u * static_cast<uint32_t>(shape.planes) +
                   static_cast<uint32_t>(coll));
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int steps = 0, at_bound = 0, recounted = 0, fabric_flows = 0;
  for (int c = 0; c < kCases; ++c) {
    const int hosts = uni(2, 12), leaves = uni(1, std::min(3, hosts)), spines = uni(1, 4);
    auto built = topo::build_rail({.hosts = hosts, .nics_per_host = shape.nics, .leaves_per_rail = leaves,
                                   .spines = spines, .planes = shape.planes});
    ASSERT_TRUE(built) << built.status().message();
    topo::Fabric& f = *built;
    if (c % 3 == 1 && spines > 1) fail_one_link(f, rng);
    std::vector<std::string> names;
    for (const auto& h : f.hosts) names.push_back(h.name);
    std::shuffle(names.begin(), names.end(), rng);
    names.resize(static_cast<size_t>(uni(2, hosts)));
    auto alloc = ranking::allocation_from_names(f, names);
    ASSERT_TRUE(alloc) << alloc.status().message();
    auto ranked = ranking::rank(f, *alloc, ranking::RankAlgo::kAuto);
    ASSERT_TRUE(ranked) << ranked.status().message();
    const ranking::RankOrder& order = *ranked;
    auto sched = build_fabric_schedule(f, order, coll, 1024, 4);
    ASSERT_TRUE(sched) << sched.status().message();
    const std::string what = fmt::format("case {}: {} hosts of {}, {} leaves/rail, {} spines/plane{}", c, names.size(),
                                         hosts, leaves, spines, c % 3 == 1 && spines > 1 ? ", a link down" : "");
    auto table = make_model_path_table(f, make_hash("crc32", static_cast<uint32_t>(c + 1)).value());
    auto planned = plan_routes(f, order, *sched, *table, {});
    ASSERT_TRUE(planned) << what << ": " << planned.status().message();
    EXPECT_EQ(planned->plan.collective, collective_name(coll));
    if (coll == Collective::kAllreduceHybrid) {
      // Only inter-host flows, between equal local ranks (rail order: a host's
      // ranks are contiguous, G x P of them).
      const int local = shape.nics * shape.planes;
      for (const auto& fl : planned->plan.flows) {
        EXPECT_NE(fl.src_host, fl.dst_host) << what;
        EXPECT_EQ(fl.src_rank % local, fl.dst_rank % local) << what;
      }
    }
    auto router = make_plan_router(f, order, planned->plan);
    ASSERT_TRUE(router) << router.status().message();
    ASSERT_TRUE(apply_plan_rounds(planned->plan, *sched));
    auto rep = check_link_load(f, order, *sched, **router);
    ASSERT_TRUE(rep) << what << ": " << rep.status().message();
    EXPECT_EQ(rep->cross_plane_flows, 0) << what;
    for (const auto& sl : rep->steps) {
      ++steps;
      at_bound += sl.max_load == sl.lower_bound;
      fabric_flows += sl.fabric_flows;
      EXPECT_LE(sl.max_load, sl.lower_bound + 1) << what << ", step " << sl.step;
    }
    if (c % 4 == 0) {
      ++recounted;
      const auto counted = recount(f, planned->plan, sched->steps.size());
      for (size_t s = 0; s < counted.size(); ++s) EXPECT_EQ(counted[s], rep->steps[s].max_load) << what << ", step " << s;
    }
  }
  RecordProperty("steps_at_bound", fmt::format("{} of {}", at_bound, steps));
  EXPECT_GE(100 * at_bound, 99 * steps) << at_bound << " of " << steps << " steps at the bound";
  EXPECT_GT(fabric_flows, 0) << "some flows must cross a spine for the test to mean anything";
  EXPECT_GT(recounted, 0);
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Shape, Collective>>& tp) {
  const auto& [shape, coll] = tp.param;
  std::string c(collective_name(coll));
  c.erase(0, c.find('-') + 1);
  c[0] = static_cast<char>(std::toupper(c[0]));
  return fmt::format("G{}P{}{}", shape.nics, shape.planes, c);
}

INSTANTIATE_TEST_SUITE_P(
    Fabrics, RailPlanePlans,
    ::testing::Combine(::testing::Values(Shape{2, 1}, Shape{4, 1}, Shape{8, 1}, Shape{2, 2}, Shape{4, 2}, Shape{8, 2}),
                       ::testing::Values(Collective::kAllreduceHybrid, Collective::kAllreduceHd,
                                         Collective::kAllreduceRing)),
    case_name);

// The library connects from and to a flow's plane's addresses (docs/
// collectives-setup.md "Several addresses, several planes"): a plan of a
// multi-plane fabric carries the ports' addresses, one plane's pair per
// flow; a single-plane fabric's plans stay as they were.
class PlaneAddresses : public ::testing::TestWithParam<std::tuple<int, Collective>> {};

TEST_P(PlaneAddresses, AreWrittenForEveryFlowOfAMultiPlaneFabric) {
  const auto [planes, coll] = GetParam();
  auto built = topo::build_rail({.hosts = 3, .nics_per_host = 2, .leaves_per_rail = 1, .spines = 2, .planes = planes});
  ASSERT_TRUE(built) << built.status().message();
  topo::Fabric& f = *built;
  for (size_t n = 0; n < f.nics.size(); ++n) f.nics[n].address = fmt::format("10.0.{}.{}", n / 250, n % 250 + 1);
  auto order = ranking::rank(f, ranking::allocation_from_names(f, {"h1", "h2", "h3"}).value(), ranking::RankAlgo::kRail);
  ASSERT_TRUE(order) << order.status().message();
  auto sched = build_fabric_schedule(f, *order, coll, 1000, 4);
  ASSERT_TRUE(sched) << sched.status().message();
  auto table = make_model_path_table(f, make_hash("crc32", 1).value());
  auto planned = plan_routes(f, *order, *sched, *table, {});
  ASSERT_TRUE(planned) << planned.status().message();
  ASSERT_FALSE(planned->plan.flows.empty());
  for (const auto& fl : planned->plan.flows) {
    const int src = *f.find_nic(fl.src_host + ":" + fl.src_nic), dst = *f.find_nic(fl.dst_host + ":" + fl.dst_nic);
    EXPECT_EQ(fl.src_addr, planes > 1 ? f.nics[static_cast<size_t>(src)].address : "") << fl.src_rank << " -> " << fl.dst_rank;
    EXPECT_EQ(fl.dst_addr, planes > 1 ? f.nics[static_cast<size_t>(dst)].address : "") << fl.src_rank << " -> " << fl.dst_rank;
    EXPECT_EQ(f.nic_plane(src), f.nic_plane(dst));
  }
}

INSTANTIATE_TEST_SUITE_P(Fabrics, PlaneAddresses,
                         ::testing::Combine(::testing::Values(1, 2, 4),
                                            ::testing::Values(Collective::kAllreduceHd, Collective::kAllreduceRing,
                                                              Collective::kAllreduceHybrid)));

}  // namespace
}  // namespace weft::routing
