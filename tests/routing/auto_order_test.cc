// auto on rail and multi-plane fabrics, for the collective it ranks for
// (routing/weft/routing/auto_order.h): the order whose link-load bound is
// lower, so never worse than leaf sets on the checker, and weft sim's case
// (c) runs that order. The rail order puts HD's fold and distance-1 flows
// between the two NICs of one host, on two rails, over a spine; leaf sets
// keep them under one rail leaf.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <random>

#include "weft/routing/auto_order.h"
#include "weft/routing/compare.h"
#include "weft/routing/hybrid_schedule.h"
#include "weft/routing/link_load.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

struct RailFabric {
  const char* name;
  topo::RailSpec spec;
  // allreduce-hd under ideal routes (weft check): each step's max load
  std::vector<int> clos_loads;  // leaf sets
  std::vector<int> rail_loads;  // the rail order
};
void PrintTo(const RailFabric& r, std::ostream* o) { *o << r.name; }

// weft sim's allocation for a topology without --hosts: every NIC,
// shuffled with the seed (tools/cmd_sim.cc, --seed 1).
std::vector<int> sim_allocation(const topo::Fabric& f) {
  auto alloc = ranking::allocation_all(f);
  std::shuffle(alloc.begin(), alloc.end(), std::mt19937(1));
  return alloc;
}

// weft check --routes ideal: the max load of each HD step.
std::vector<int> hd_step_loads(const topo::Fabric& f, const ranking::RankOrder& order) {
  auto sched = build_schedule(Collective::kAllreduceHd, order.size(), 1 << 20, 4).value();
  auto router = make_ideal_router(f, order);
  std::vector<int> out;
  const LoadReport rep = check_link_load(f, order, sched, *router).value();
  for (const auto& st : rep.steps) out.push_back(st.max_load);
  return out;
}

// auto_order's weight of an order for collective c: each step's checker
// bound times its largest flow, summed, in vectors.
double bound_vectors(const topo::Fabric& f, const ranking::RankOrder& order, Collective c) {
  constexpr uint64_t kCount = 1 << 20;
  auto sched = build_fabric_schedule(f, order, c, kCount, 4).value();
  double sum = 0;
  for (const auto& st : sched.steps) {
    uint64_t largest = 0;
    for (const auto& fl : st.flows) largest = std::max(largest, fl.bytes);
    sum += step_lower_bound(f, order, st) * static_cast<double>(largest) / (kCount * 4);
  }
  return sum;
}

class AutoOnRailFabric : public ::testing::TestWithParam<RailFabric> {};

TEST_P(AutoOnRailFabric, RanksHdWithLeafSetsAtTheirCheckerLoadNotTheRailOrders) {
  auto f = topo::build_rail(GetParam().spec).value();
  const auto alloc = sim_allocation(f);
  auto chosen = auto_order(f, alloc, Collective::kAllreduceHd);
  ASSERT_TRUE(chosen) << chosen.status().message();
  EXPECT_EQ(chosen->algo, ranking::RankAlgo::kClos);
  EXPECT_EQ(hd_step_loads(f, ranking::rank(f, alloc, ranking::RankAlgo::kClos).value()), GetParam().clos_loads);
  EXPECT_EQ(hd_step_loads(f, ranking::rank(f, alloc, ranking::RankAlgo::kRail).value()), GetParam().rail_loads);
  EXPECT_EQ(hd_step_loads(f, chosen->order), GetParam().clos_loads);
  EXPECT_NE(chosen->why.find("its link-load bound for allreduce-hd is lower"), std::string::npos) << chosen->why;
}

TEST_P(AutoOnRailFabric, SimRunsWeftsHdCaseOnLeafSetsNoSlowerThanLeafSetsWithEcmp) {
  auto f = topo::build_rail(GetParam().spec).value();
  auto cmp = compare_routings(f, sim_allocation(f), CompareOptions{});  // weft sim's defaults: HD, 64 MiB
  ASSERT_TRUE(cmp) << cmp.status().message();
  const auto &b = cmp->cases[1], &c = cmp->cases[2], &d = cmp->cases[3];
  std::printf("%s: (b) %.1f ms (c) %.1f ms (d) %.1f ms\n", GetParam().name, b.seconds * 1e3, c.seconds * 1e3,
              d.seconds * 1e3);
  EXPECT_LE(c.seconds, b.seconds);
  // (c) is planned for leaf sets' order: without rounds its worst step is
  // bound at their worst step's load (the rail order's is 3 on 7 hosts x 2 planes).
  const auto& clos = GetParam().clos_loads;
  EXPECT_EQ(c.single_round_bound, *std::max_element(clos.begin(), clos.end()));
}

// HD and hybrid: auto's order is bounded no higher than the other one (the
// sum auto_order weighs), and it is the order rank() gives. HD takes leaf
// sets; hybrid's inter-host steps join equal local ranks, which both orders
// keep on one rail, so the tie keeps the rail order (a host's ranks
// together, as launchers need). Rings take the ring order, unweighed, as
// weft sim's (c) runs them.
TEST_P(AutoOnRailFabric, TakesLeafSetsForHdKeepsRailForHybridAndTheRingOrderForRings) {
  auto f = topo::build_rail(GetParam().spec).value();
  const auto alloc = sim_allocation(f);
  for (auto c : {Collective::kAllreduceHd, Collective::kAllreduceHybrid}) {
    auto chosen = auto_order(f, alloc, c);
    ASSERT_TRUE(chosen) << collective_name(c) << ": " << chosen.status().message();
    EXPECT_EQ(chosen->algo, c == Collective::kAllreduceHybrid ? ranking::RankAlgo::kRail : ranking::RankAlgo::kClos)
        << collective_name(c);
    ASSERT_EQ(chosen->weighed.size(), 2u) << collective_name(c);
    EXPECT_EQ(chosen->weighed[0].algo, ranking::RankAlgo::kRail);
    EXPECT_EQ(chosen->weighed[1].algo, ranking::RankAlgo::kClos);
    const bool clos_won = chosen->algo == ranking::RankAlgo::kClos;
    const auto& won = chosen->weighed[clos_won ? 1 : 0];
    const auto& lost = chosen->weighed[clos_won ? 0 : 1];
    EXPECT_LE(won.bound_vectors, lost.bound_vectors) << collective_name(c);
    EXPECT_EQ(chosen->order, ranking::rank(f, alloc, chosen->algo).value()) << collective_name(c);
  }
  for (auto c : {Collective::kAllreduceRing, Collective::kNcclRing}) {
    auto chosen = auto_order(f, alloc, c);
    ASSERT_TRUE(chosen) << collective_name(c) << ": " << chosen.status().message();
    EXPECT_EQ(chosen->algo, ranking::RankAlgo::kRing) << collective_name(c);
    EXPECT_TRUE(chosen->weighed.empty()) << collective_name(c);
    EXPECT_EQ(chosen->order, ranking::rank(f, alloc, ranking::RankAlgo::kRing).value()) << collective_name(c);
  }
  // Unweighed, yet never bounded above leaf sets for a ring: what weighing
  // would have checked (nccl-ring's schedule needs one rank per host).
  const auto ring = auto_order(f, alloc, Collective::kAllreduceRing).value();
  EXPECT_LE(bound_vectors(f, ring.order, Collective::kAllreduceRing),
            bound_vectors(f, ranking::rank(f, alloc, ranking::RankAlgo::kClos).value(), Collective::kAllreduceRing));
}

// A fabric without rails or planes has one candidate: nothing weighed, and
// weft rank has nothing to say.
TEST(AutoOnClos, RanksWithLeafSetsWithoutWeighing) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 3, .hosts_per_leaf = 3, .nics_per_host = 2}).value();
  const auto alloc = sim_allocation(f);
  auto chosen = auto_order(f, alloc, Collective::kAllreduceHd);
  ASSERT_TRUE(chosen) << chosen.status().message();
  EXPECT_EQ(chosen->algo, ranking::RankAlgo::kClos);
  EXPECT_TRUE(chosen->weighed.empty());
  EXPECT_EQ(chosen->why, "");
  EXPECT_EQ(chosen->order, ranking::rank(f, alloc, ranking::RankAlgo::kClos).value());
}

INSTANTIATE_TEST_SUITE_P(
    Fabrics, AutoOnRailFabric,
    ::testing::Values(
        RailFabric{"H6G2R2S2", {.hosts = 6, .nics_per_host = 2, .leaves_per_rail = 2, .spines = 2},
                   {1, 1, 1, 2, 2, 1, 1, 1}, {2, 2, 1, 2, 2, 1, 2, 2}},
        RailFabric{"H4G2S2", {.hosts = 4, .nics_per_host = 2, .leaves_per_rail = 1, .spines = 2},
                   {1, 1, 2, 2, 1, 1}, {2, 1, 1, 1, 1, 2}},
        RailFabric{"H8G2R2S2", {.hosts = 8, .nics_per_host = 2, .leaves_per_rail = 2, .spines = 2},
                   {1, 1, 2, 2, 2, 2, 1, 1}, {2, 1, 1, 2, 2, 1, 1, 2}},
        // Fold and unfold at load 3 on the rail order (the whole vector), 1 on leaf sets.
        RailFabric{"H7G2S2P2", {.hosts = 7, .nics_per_host = 2, .leaves_per_rail = 1, .spines = 2, .planes = 2},
                   {1, 2, 2, 2, 2, 2, 2, 2, 2, 1}, {3, 1, 1, 2, 2, 2, 2, 1, 1, 3}},
        RailFabric{"H5G4S2", {.hosts = 5, .nics_per_host = 4, .leaves_per_rail = 1, .spines = 2},
                   {1, 1, 2, 3, 3, 3, 3, 2, 1, 1}, {1, 3, 2, 3, 3, 3, 3, 2, 3, 1}}),
    [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace weft::routing
