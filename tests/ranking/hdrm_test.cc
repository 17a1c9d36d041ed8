// HDRM on an M x N BiGraph: every HD step puts at most one connection on each
// upper–lower link and never routes a connection through a same-part (two
// hop) path — checked by the link-load checker, not by HDRM's own maths.
#include <gtest/gtest.h>

#include "weft/ranking/rank_order.h"
#include "weft/routing/link_load.h"
#include "weft/topology/builders.h"

namespace weft::ranking {
namespace {

struct Shape {
  int n;
  int m;
};

routing::LoadReport check_hd(const topo::Fabric& f, const RankOrder& order) {
  auto sched = routing::build_schedule(routing::Collective::kAllreduceHd, order.size(), 1024);
  EXPECT_TRUE(sched);
  auto router = routing::make_ideal_router(f, order);
  auto rep = routing::check_link_load(f, order, *sched, *router);
  EXPECT_TRUE(rep) << rep.status().message();
  return *rep;
}

class HdrmOnBiGraph : public ::testing::TestWithParam<Shape> {};

TEST_P(HdrmOnBiGraph, PutsOneConnectionPerUpperLowerLinkAndNoTwoHopPaths) {
  const auto [n, m] = GetParam();
  auto f = topo::build_bigraph({.switches = n, .subnodes = m});
  ASSERT_TRUE(f);
  auto order = rank(*f, allocation_all(*f), RankAlgo::kHdrm);
  ASSERT_TRUE(order) << order.status().message();
  ASSERT_EQ(order->size(), n * m);
  auto rep = check_hd(*f, *order);
  for (const auto& s : rep.steps) {
    EXPECT_LE(s.max_fabric_load, 1) << "step " << s.step << " distance " << s.distance;
    EXPECT_EQ(s.multi_hop_flows, 0) << "step " << s.step << " distance " << s.distance;
    EXPECT_EQ(s.fabric_flows, s.flows) << "every HD partner must be across the parts";
  }
}

std::vector<Shape> all_shapes() {
  std::vector<Shape> out;
  for (int n : {4, 8, 16, 32, 64}) {
    for (int m = 1; m <= n / 2; m *= 2) out.push_back({n, m});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllPowerOfTwoM, HdrmOnBiGraph, ::testing::ValuesIn(all_shapes()),
                         [](const auto& p) {
                           return "N" + std::to_string(p.param.n) + "M" + std::to_string(p.param.m);
                         });

TEST(HdrmOnBiGraph, NaiveOrderViolatesForSomeMAtEveryNFrom8) {
  for (int n : {8, 16, 32, 64}) {
    bool violated = false;
    for (int m = 1; m <= n / 2 && !violated; m *= 2) {
      auto f = topo::build_bigraph({.switches = n, .subnodes = m});
      ASSERT_TRUE(f);
      auto rep = check_hd(*f, rank_naive(allocation_all(*f)));
      for (const auto& s : rep.steps) violated |= s.max_fabric_load > 1 || s.multi_hop_flows > 0;
    }
    EXPECT_TRUE(violated) << "N=" << n;
  }
}

TEST(HdrmOnBiGraph, BaseGroupOfEightMatchesThePaper) {
  // EFLOPS: X = [0,3,5,6] on the upper switches, Y = [1,2,4,7] on the lower.
  auto f = topo::build_bigraph({.switches = 8, .subnodes = 1});
  ASSERT_TRUE(f);
  auto order = rank_hdrm(*f, allocation_all(*f));
  ASSERT_TRUE(order);
  std::vector<std::string> sw;
  for (int r = 0; r < 8; ++r) sw.push_back(f->switches[f->nic_switch(order->nics[r])].name);
  EXPECT_EQ(sw, (std::vector<std::string>{"u1", "w1", "w2", "u2", "w3", "u3", "u4", "w4"}));
}

TEST(HdrmOnBiGraph, RejectsMoreSubnodesThanHalfTheSwitches) {
  auto f = topo::build_bigraph({.switches = 8, .subnodes = 5});
  ASSERT_TRUE(f);
  auto order = rank(*f, allocation_all(*f), RankAlgo::kHdrm);
  ASSERT_FALSE(order);
  EXPECT_EQ(order.status().message(), "hdrm: M = 5 subnodes per switch exceeds N/2 = 4 (an M x N BiGraph needs M <= N/2)");
}

TEST(HdrmOnBiGraph, RejectsAClosFabric) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 2});
  ASSERT_TRUE(f);
  auto order = rank(*f, allocation_all(*f), RankAlgo::kHdrm);
  ASSERT_FALSE(order);
  EXPECT_NE(order.status().message().find("hdrm needs a BiGraph fabric"), std::string::npos);
}

TEST(HdrmOnBiGraph, AutoPicksHdrmOnBiGraph) {
  auto f = topo::build_bigraph({.switches = 8, .subnodes = 4});
  ASSERT_TRUE(f);
  auto a = rank(*f, allocation_all(*f), RankAlgo::kAuto);
  auto h = rank(*f, allocation_all(*f), RankAlgo::kHdrm);
  ASSERT_TRUE(a && h);
  EXPECT_EQ(*a, *h);
}

struct Misfit {
  const char* name;
  int switches, subnodes;
  std::vector<int> take;  // NIC indices allocated; empty = all
  std::string hdrm_says;
};
std::ostream& operator<<(std::ostream& o, const Misfit& m) { return o << m.name; }

class AutoOnBiGraph : public ::testing::TestWithParam<Misfit> {};

// An allocation HDRM does not fit is ranked with leaf sets, not refused;
// hdrm asked for by name still refuses it, naming why and what to use.
TEST_P(AutoOnBiGraph, RanksAnAllocationHdrmDoesNotFitWithLeafSets) {
  const Misfit& m = GetParam();
  auto f = topo::build_bigraph({.switches = m.switches, .subnodes = m.subnodes});
  ASSERT_TRUE(f);
  const std::vector<int> alloc = m.take.empty() ? allocation_all(*f) : m.take;
  auto h = rank(*f, alloc, RankAlgo::kHdrm);
  ASSERT_FALSE(h);
  EXPECT_EQ(h.status().message(), m.hdrm_says);
  EXPECT_EQ(resolve_auto(*f, alloc), RankAlgo::kClos);
  auto a = rank(*f, alloc, RankAlgo::kAuto);
  auto c = rank(*f, alloc, RankAlgo::kClos);
  ASSERT_TRUE(a && c) << a.status().message();
  EXPECT_EQ(*a, *c);
}

INSTANTIATE_TEST_SUITE_P(
    Allocations, AutoOnBiGraph,
    ::testing::Values(
        Misfit{"SixSwitches", 6, 2, {},
               "hdrm: N/2 = 3 switches per part and M = 2 subnodes per switch must both be powers of two (use "
               "--algo clos)"},
        Misfit{"ThreeSubnodes", 8, 3, {},
               "hdrm: N/2 = 4 switches per part and M = 3 subnodes per switch must both be powers of two (use "
               "--algo clos)"},
        Misfit{"MoreSubnodesThanHalf", 8, 5, {},
               "hdrm: M = 5 subnodes per switch exceeds N/2 = 4 (an M x N BiGraph needs M <= N/2)"},
        Misfit{"OneNic", 8, 4, {0},
               "hdrm needs as many upper as lower switches in the allocation (got 1 upper, 0 lower; use --algo "
               "clos)"}));

TEST(AutoOnBiGraph, AnUnevenAllocationIsRankedWithLeafSets) {
  auto f = topo::build_bigraph({.switches = 8, .subnodes = 4});
  ASSERT_TRUE(f);
  // Two subnodes of the first switch, one of each other: uneven.
  std::vector<int> alloc;
  for (int sw = 0, n = 0; sw < 8; ++sw) {
    std::vector<int> on;
    for (int i = 0; i < static_cast<int>(f->nics.size()); ++i) {
      if (f->nic_switch(i) == f->nic_switch(n) && on.size() < (sw == 0 ? 2u : 1u)) on.push_back(i);
    }
    alloc.insert(alloc.end(), on.begin(), on.end());
    n += 4;
  }
  ASSERT_EQ(alloc.size(), 9u);
  auto h = rank(*f, alloc, RankAlgo::kHdrm);
  ASSERT_FALSE(h);
  EXPECT_NE(h.status().message().find("same number of subnodes on every switch"), std::string::npos);
  EXPECT_NE(h.status().message().find("(use --algo clos)"), std::string::npos);
  auto a = rank(*f, alloc, RankAlgo::kAuto);
  ASSERT_TRUE(a) << a.status().message();
  EXPECT_EQ(*a, *rank(*f, alloc, RankAlgo::kClos));
}

}  // namespace
}  // namespace weft::ranking
