#include <gtest/gtest.h>

#include <map>
#include <set>

#include "weft/ranking/rank_order.h"
#include "weft/routing/link_load.h"
#include "weft/topology/builders.h"

namespace weft::ranking {
namespace {

class ContiguousOnFullClos : public ::testing::TestWithParam<std::tuple<int, int>> {};

// S = H: in every cross-leaf HD step each leaf's flows all go to ONE other
// leaf (ACCL: set i talks to set i XOR d/M), and ideal spines give load 1.
TEST_P(ContiguousOnFullClos, SendsEachLeafToOneOtherLeafAndLoadsEveryLinkOnce) {
  const auto [h, l] = GetParam();
  auto f = topo::build_clos2({.spines = h, .leaves = l, .hosts_per_leaf = h});
  ASSERT_TRUE(f);
  std::vector<int> shuffled = allocation_all(*f);
  std::reverse(shuffled.begin(), shuffled.end());
  auto order = rank(*f, shuffled, RankAlgo::kClos);
  ASSERT_TRUE(order);
  auto sched = routing::build_schedule(routing::Collective::kAllreduceHd, order->size(), 4096);
  ASSERT_TRUE(sched);
  for (const auto& step : sched->steps) {
    std::map<int, std::set<int>> dests;
    for (const auto& fl : step.flows) {
      int ls = f->nic_switch(order->nics[fl.src]), ld = f->nic_switch(order->nics[fl.dst]);
      if (ls != ld) dests[ls].insert(ld);
    }
    if (step.distance < h) {
      EXPECT_TRUE(dests.empty()) << "distance " << step.distance << " must stay inside the leaf";
    } else {
      EXPECT_EQ(dests.size(), static_cast<size_t>(l));
      for (const auto& [leaf, d] : dests) EXPECT_EQ(d.size(), 1u) << "leaf " << f->switches[leaf].name;
    }
  }
  auto router = routing::make_ideal_router(*f, *order);
  auto rep = routing::check_link_load(*f, *order, *sched, *router);
  ASSERT_TRUE(rep) << rep.status().message();
  EXPECT_EQ(rep->max_load, 1);
}

INSTANTIATE_TEST_SUITE_P(Sizes, ContiguousOnFullClos,
                         ::testing::Combine(::testing::Values(1, 2, 4, 8), ::testing::Values(2, 4, 8, 16)));

TEST(LeafSets, PutsLargerSetsFirstAndKeepsAHostsNicsAdjacent) {
  auto f = topo::build_clos2({.spines = 4, .leaves = 3, .hosts_per_leaf = 3, .nics_per_host = 2});
  ASSERT_TRUE(f);
  auto alloc = allocation_from_names(*f, {"h1-1", "h3-2:eth1", "h2-1", "h2-3", "h3-1:eth0", "h2-2:eth1"});
  ASSERT_TRUE(alloc) << alloc.status().message();
  auto order = rank(*f, *alloc, RankAlgo::kClos);
  ASSERT_TRUE(order);
  std::vector<std::string> names;
  for (int n : order->nics) names.push_back(f->nic_qualified_name(n));
  EXPECT_EQ(names, (std::vector<std::string>{"h2-1:eth0", "h2-1:eth1", "h2-2:eth1", "h2-3:eth0", "h2-3:eth1",
                                             "h1-1:eth0", "h1-1:eth1", "h3-1:eth0", "h3-2:eth1"}));
}

TEST(RingOrder, CrossesEachLeafBoundaryOnce) {
  auto f = topo::build_clos3({.pods = 2, .leaves_per_pod = 3, .aggs_per_pod = 2, .cores = 2, .hosts_per_leaf = 2});
  ASSERT_TRUE(f);
  std::vector<int> alloc = allocation_all(*f);
  // Interleave: every other NIC first.
  std::vector<int> mixed;
  for (size_t i = 0; i < alloc.size(); i += 2) mixed.push_back(alloc[i]);
  for (size_t i = 1; i < alloc.size(); i += 2) mixed.push_back(alloc[i]);
  auto order = rank(*f, mixed, RankAlgo::kRing);
  ASSERT_TRUE(order);
  int leaf_cross = 0, pod_cross = 0;
  for (int r = 0; r < order->size(); ++r) {
    int a = f->nic_switch(order->nics[r]), b = f->nic_switch(order->nics[(r + 1) % order->size()]);
    leaf_cross += a != b;
    pod_cross += f->switches[a].pod != f->switches[b].pod;
  }
  EXPECT_EQ(leaf_cross, 6);
  EXPECT_EQ(pod_cross, 2);
}

TEST(Allocation, RejectsDuplicatesAndUnknownHostsByName) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 2, .nics_per_host = 2});
  ASSERT_TRUE(f);
  auto dup = allocation_from_names(*f, {"h1-1", "h1-1:eth1"});
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.status().message(), "duplicate host: 'h1-1:eth1' lists h1-1:eth1 a second time");
  auto unknown = allocation_from_names(*f, {"h9-9"});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.status().message(), "host 'h9-9' is not in the topology 'clos2-2x2x2x2'");
}

}  // namespace
}  // namespace weft::ranking
