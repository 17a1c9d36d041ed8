// The link-load checker on rail and multi-plane fabrics: flows that leave
// their rail are counted, a flow rides its source port's plane to the
// destination NIC's port on it (routing/weft/routing/planes.h), flows between
// two ports of one NIC take no link, and the max load of every rail's and
// plane's links is reported.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <regex>

#include "weft/ranking/rank_order.h"
#include "weft/routing/link_load.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

TEST(RailLinkLoad, CarriesHdOnTheSourcePlaneOfADualPlaneRailFabric) {
  // 4 hosts x 2 NICs x 2 ports: local rank l = 2 * plane + rail.
  auto f = topo::build_rail({.hosts = 4, .nics_per_host = 2, .leaves_per_rail = 1, .spines = 2, .planes = 2});
  ASSERT_TRUE(f);
  auto order = ranking::rank(*f, ranking::allocation_all(*f), ranking::RankAlgo::kRail);
  ASSERT_TRUE(order);
  auto sched = build_schedule(Collective::kAllreduceHd, 16, 64, 4);
  ASSERT_TRUE(sched);
  auto router = make_ideal_router(*f, *order);
  auto rep = check_link_load(*f, *order, *sched, *router);
  ASSERT_TRUE(rep) << rep.status().message();
  ASSERT_EQ(rep->steps.size(), 8u);  // rs d=1,2,4,8, ag d=8,4,2,1
  const int cross_rail[8] = {16, 0, 0, 0, 0, 0, 0, 16};
  // d=2 pairs the two ports of one NIC: in-NIC flows, no link, no bound.
  const int in_nic[8] = {0, 16, 0, 0, 0, 0, 16, 0};
  for (size_t s = 0; s < 8; ++s) {
    EXPECT_EQ(rep->steps[s].cross_rail_flows, cross_rail[s]) << "step " << s;
    EXPECT_EQ(rep->steps[s].cross_plane_flows, 0) << "step " << s;
    EXPECT_EQ(rep->steps[s].in_nic_flows, in_nic[s]) << "step " << s;
    EXPECT_EQ(rep->steps[s].flows, 16);
  }
  EXPECT_EQ(rep->cross_plane_flows, 0);
  EXPECT_EQ(rep->first_cross_plane, "");
  EXPECT_EQ(rep->steps[1].max_load, 0);
  EXPECT_EQ(rep->steps[1].lower_bound, 0);
  // d=4 and d=8 pair equal local ranks of two hosts under one rail leaf.
  for (size_t s : {2u, 3u, 4u, 5u}) {
    EXPECT_EQ(rep->steps[s].fabric_flows, 0) << "step " << s;
    EXPECT_EQ(rep->steps[s].rail_max_load, (std::vector<int>{1, 1})) << "step " << s;
    EXPECT_EQ(rep->steps[s].plane_max_load, (std::vector<int>{1, 1})) << "step " << s;
  }
  // d=1: 4 flows leave every rail leaf over its 2 spine uplinks.
  EXPECT_EQ(rep->steps[0].fabric_flows, 16);
  EXPECT_EQ(rep->steps[0].lower_bound, 2);
  EXPECT_EQ(rep->steps[0].plane_max_load, (std::vector<int>{2, 2}));
}

// The rail and plane of a link recomputed from the builder's switch names
// (pl<plane+1>- prefix, r<rail+1>-l<k> leaves), independent of fabric.h.
std::pair<int, int> rail_plane_by_name(const topo::Fabric& f, int link) {
  static const std::regex kName(R"((?:pl(\d+)-)?(?:r(\d+)-l\d+|s\d+))");
  int rail = -1, plane = -1;
  for (int v : {f.links[static_cast<size_t>(link)].a, f.links[static_cast<size_t>(link)].b}) {
    if (!f.is_switch_vertex(v)) continue;
    std::smatch m;
    const std::string name = f.vertex_name(v);
    EXPECT_TRUE(std::regex_match(name, m, kName)) << name;
    if (m[1].matched) plane = std::stoi(m[1]) - 1;
    if (m[2].matched) rail = std::stoi(m[2]) - 1;
  }
  return {rail, plane};
}

struct RailLoadCase {
  int hosts, nics, leaves_per_rail, planes;
  Collective coll;
};

class RailLinkLoadRecount : public ::testing::TestWithParam<RailLoadCase> {};

TEST_P(RailLinkLoadRecount, MatchesABruteForceRecountOfRailAndPlaneFlowsAndLinks) {
  const auto c = GetParam();
  auto f = topo::build_rail(
      {.hosts = c.hosts, .nics_per_host = c.nics, .leaves_per_rail = c.leaves_per_rail, .spines = 3, .planes = c.planes});
  ASSERT_TRUE(f);
  auto order = ranking::rank(*f, ranking::allocation_all(*f), ranking::RankAlgo::kAuto);
  ASSERT_TRUE(order);
  auto sched = build_schedule(c.coll, order->size(), 4 * order->size(), 4);
  ASSERT_TRUE(sched);
  for (bool ecmp : {false, true}) {
    auto router = ecmp ? make_ecmp_router(*f, *order, {.seed = 3}).value() : make_ideal_router(*f, *order);
    auto rep = check_link_load(*f, *order, *sched, *router, {.keep_per_link = true});
    ASSERT_TRUE(rep) << rep.status().message();
    const int local = c.nics * c.planes;
    int total_cross_plane = 0;
    for (size_t s = 0; s < sched->steps.size(); ++s) {
      const auto& sl = rep->steps[s];
      // Rank r is local rank r % local of its host: rail l % G, plane l / G.
      // A flow rides its source's plane, so none crosses planes; it stays
      // inside one NIC when both ranks are ports of one host's NIC g.
      int cross_rail = 0, cross_plane = 0, in_nic = 0;
      for (const auto& fl : sched->steps[s].flows) {
        const int ls = fl.src % local, ld = fl.dst % local;
        cross_rail += ls % c.nics != ld % c.nics;
        in_nic += fl.src / local == fl.dst / local && ls % c.nics == ld % c.nics;
      }
      EXPECT_EQ(sl.cross_rail_flows, cross_rail) << "step " << s;
      EXPECT_EQ(sl.cross_plane_flows, cross_plane) << "step " << s;
      EXPECT_EQ(sl.in_nic_flows, in_nic) << "step " << s;
      total_cross_plane += cross_plane;
      std::vector<int> rail_max(static_cast<size_t>(c.nics), 0), plane_max(c.planes > 1 ? static_cast<size_t>(c.planes) : 0, 0);
      for (size_t dl = 0; dl < sl.load.size(); ++dl) {
        auto [rail, plane] = rail_plane_by_name(*f, static_cast<int>(dl / 2));
        if (rail >= 0) rail_max[static_cast<size_t>(rail)] = std::max(rail_max[static_cast<size_t>(rail)], sl.load[dl]);
        if (plane >= 0) plane_max[static_cast<size_t>(plane)] = std::max(plane_max[static_cast<size_t>(plane)], sl.load[dl]);
      }
      EXPECT_EQ(sl.rail_max_load, rail_max) << "step " << s;
      EXPECT_EQ(sl.plane_max_load, plane_max) << "step " << s;
    }
    EXPECT_EQ(rep->cross_plane_flows, total_cross_plane);
    EXPECT_EQ(rep->first_cross_plane.empty(), total_cross_plane == 0);
    if (c.planes == 1) {
      EXPECT_EQ(total_cross_plane, 0);
    }
  }
}

std::vector<RailLoadCase> cases() {
  std::vector<RailLoadCase> out;
  for (int g : {2, 4, 8}) {
    for (int p : {1, 2}) {
      out.push_back({3, g, 1, p, Collective::kAllreduceHd});
      out.push_back({7, g, 2, p, Collective::kAllreduceHd});
      out.push_back({7, g, 2, p, Collective::kAllreduceRing});
    }
  }
  return out;
}

std::string case_name(const ::testing::TestParamInfo<RailLoadCase>& tp) {
  const auto& c = tp.param;
  return fmt::format("H{}G{}R{}P{}{}", c.hosts, c.nics, c.leaves_per_rail, c.planes,
                     c.coll == Collective::kAllreduceHd ? "Hd" : "Ring");
}

INSTANTIATE_TEST_SUITE_P(Shapes, RailLinkLoadRecount, ::testing::ValuesIn(cases()), case_name);

class RailIdealRoutes : public ::testing::TestWithParam<RailLoadCase> {};

TEST_P(RailIdealRoutes, ReachTheLowerBoundInEveryStepByColouringEachPlane) {
  // 4 spines per plane: as many as a rail leaf has hosts, so every step's
  // leaf-to-leaf multigraph is colourable (König) and the bound is exact.
  const auto c = GetParam();
  auto f = topo::build_rail(
      {.hosts = c.hosts, .nics_per_host = c.nics, .leaves_per_rail = c.leaves_per_rail, .spines = 4, .planes = c.planes});
  ASSERT_TRUE(f);
  auto order = ranking::rank(*f, ranking::allocation_all(*f), ranking::RankAlgo::kRail);
  ASSERT_TRUE(order);
  auto sched = build_schedule(c.coll, order->size(), 4 * order->size(), 4);
  ASSERT_TRUE(sched);
  auto router = make_ideal_router(*f, *order);
  auto rep = check_link_load(*f, *order, *sched, *router);
  ASSERT_TRUE(rep) << rep.status().message();
  int fabric_flows = 0;
  for (const auto& s : rep->steps) {
    EXPECT_EQ(s.max_load, s.lower_bound) << "step " << s.step << " (" << s.phase << " d=" << s.distance << ")";
    fabric_flows += s.fabric_flows;
  }
  EXPECT_GT(fabric_flows, 0) << "some flows must cross a spine for the test to mean anything";
}

INSTANTIATE_TEST_SUITE_P(Shapes, RailIdealRoutes, ::testing::ValuesIn(cases()), case_name);

TEST(RailLinkLoad, ReportsNoRailsOrPlanesOnAClosFabric) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 3});
  ASSERT_TRUE(f);
  ranking::RankOrder order{ranking::allocation_all(*f)};
  auto sched = build_schedule(Collective::kAllreduceHd, 6, 24, 4);
  auto router = make_ideal_router(*f, order);
  auto rep = check_link_load(*f, order, *sched, *router);
  ASSERT_TRUE(rep);
  for (const auto& s : rep->steps) {
    EXPECT_EQ(s.cross_rail_flows, 0);
    EXPECT_EQ(s.cross_plane_flows, 0);
    EXPECT_TRUE(s.rail_max_load.empty());
    EXPECT_TRUE(s.plane_max_load.empty());
  }
}

}  // namespace
}  // namespace weft::routing
