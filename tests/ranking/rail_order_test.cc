// Rail ranking: rank = (host, local rank), local rank l on the same rail and
// plane on every host, a host's ranks contiguous; rank files keep working.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "weft/ranking/rank_file.h"
#include "weft/ranking/rank_order.h"
#include "weft/topology/builders.h"
#include "weft/topology/topology_file.h"

namespace weft::ranking {
namespace {

struct RailShape {
  int hosts, nics, leaves_per_rail, planes;
};

class RailOrder : public ::testing::TestWithParam<RailShape> {};

TEST_P(RailOrder, GivesLocalRankGNicGOfPlaneKOnEveryHostInHostOrder) {
  const auto c = GetParam();
  auto f = topo::build_rail(
      {.hosts = c.hosts, .nics_per_host = c.nics, .leaves_per_rail = c.leaves_per_rail, .spines = 2, .planes = c.planes});
  ASSERT_TRUE(f) << f.status().message();
  auto order = rank(*f, allocation_all(*f), RankAlgo::kAuto);
  ASSERT_TRUE(order) << order.status().message();
  const int local = c.nics * c.planes;
  ASSERT_EQ(order->size(), c.hosts * local);
  for (int r = 0; r < order->size(); ++r) {
    const int n = order->nics[static_cast<size_t>(r)], l = r % local;
    // Every host's block of leaves is one group and the groups are in host
    // order (the first hosts % leaves blocks are the larger ones).
    EXPECT_EQ(f->hosts[static_cast<size_t>(f->nics[n].host)].name, fmt::format("h{}", r / local + 1)) << "rank " << r;
    EXPECT_EQ(f->nic_rail(n), l % c.nics) << "rank " << r;
    EXPECT_EQ(f->nic_plane(n), c.planes > 1 ? l / c.nics : -1) << "rank " << r;
    EXPECT_EQ(f->nics[n].index_on_host, l) << "the k-th rank of a host is its k-th NIC";
  }
}

TEST_P(RailOrder, WritesRankFilesThatReadBackToTheSameOrder) {
  const auto c = GetParam();
  auto f = topo::build_rail(
      {.hosts = c.hosts, .nics_per_host = c.nics, .leaves_per_rail = c.leaves_per_rail, .spines = 2, .planes = c.planes});
  ASSERT_TRUE(f) << f.status().message();
  auto order = rank(*f, allocation_all(*f), RankAlgo::kRail);
  ASSERT_TRUE(order);
  for (auto fmt : {RankFormat::kOpenMpi, RankFormat::kMpich, RankFormat::kSlurm, RankFormat::kHccl, RankFormat::kTorchrun,
                   RankFormat::kCsv}) {
    auto text = format_rank_file(*f, *order, fmt);
    if (fmt == RankFormat::kHccl && c.planes > 1) {  // two ranks (ports) per device: HCCL runs one
      ASSERT_FALSE(text);
      EXPECT_EQ(text.status().message(),
                fmt::format("hccl cannot express this order: ranks 0 and {} are both on device 0 of host 'h1' (HCCL "
                            "runs one rank per device; the ports of one NIC on several planes serve one device): rank "
                            "one port per device, or use --format csv or openmpi",
                            c.nics));
      continue;
    }
    ASSERT_TRUE(text) << rank_format_name(fmt) << ": " << text.status().message();
    auto back = parse_rank_file(*f, *text, fmt);
    ASSERT_TRUE(back) << rank_format_name(fmt) << ": " << back.status().message();
    EXPECT_EQ(*back, *order) << rank_format_name(fmt);
  }
}

std::vector<RailShape> shapes() {
  std::vector<RailShape> out;
  for (int g : {2, 4, 8}) {
    for (int p : {1, 2}) {
      out.push_back({3, g, 1, p});
      out.push_back({7, g, 2, p});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, RailOrder, ::testing::ValuesIn(shapes()), [](const auto& tp) {
  return fmt::format("H{}G{}R{}P{}", tp.param.hosts, tp.param.nics, tp.param.leaves_per_rail, tp.param.planes);
});

std::vector<std::string> names(const topo::Fabric& f, const RankOrder& o) {
  std::vector<std::string> out;
  for (int n : o.nics) out.push_back(f.nic_qualified_name(n));
  return out;
}

TEST(RailOrder, KeepsHostsOfOneRailLeafTogetherLargestGroupFirstFullHostsFirst) {
  // 7 hosts on 2 leaves per rail: h1-h4 under r*-l1, h5-h7 under r*-l2.
  auto f = topo::build_rail({.hosts = 7, .nics_per_host = 2, .leaves_per_rail = 2, .spines = 2});
  ASSERT_TRUE(f);
  auto alloc = allocation_from_names(*f, {"h1", "h6:eth1", "h7", "h5", "h2:eth0"});
  ASSERT_TRUE(alloc) << alloc.status().message();
  auto order = rank(*f, *alloc, RankAlgo::kRail);
  ASSERT_TRUE(order);
  // Groups by the leaves of the allocated NICs: {h5, h7} (4 NICs on l2),
  // {h1} (2 on l1), {h2:eth0} and {h6:eth1} (1 each, in host order).
  EXPECT_EQ(names(*f, *order), (std::vector<std::string>{"h5:eth0", "h5:eth1", "h7:eth0", "h7:eth1", "h1:eth0", "h1:eth1",
                                                         "h2:eth0", "h6:eth1"}));
}

TEST(RailOrder, PutsFullHostsBeforeLargerGroupsOfPartialOnesSoTheyStayAligned) {
  auto f = topo::build_rail({.hosts = 7, .nics_per_host = 2, .leaves_per_rail = 2, .spines = 2});
  ASSERT_TRUE(f);
  auto alloc = allocation_from_names(*f, {"h5:eth0", "h6:eth0", "h7:eth0", "h1"});
  ASSERT_TRUE(alloc);
  auto order = rank(*f, *alloc, RankAlgo::kRail);
  ASSERT_TRUE(order);
  EXPECT_EQ(names(*f, *order), (std::vector<std::string>{"h1:eth0", "h1:eth1", "h5:eth0", "h6:eth0", "h7:eth0"}));
}

TEST(RailOrder, OrdersAHostsNicsByRailNotByTheirPlaceInTheFile) {
  // h2 lists its rail-1 NIC first: local rank 0 must still be its rail-0 NIC.
  auto f = topo::parse_topology(R"({"kind": "rail",
    "switches": [{"name": "s1", "tier": 1}, {"name": "a", "rail": 0}, {"name": "b", "rail": 1}],
    "hosts": [{"name": "h1", "nics": [{"name": "x", "switch": "a"}, {"name": "y", "switch": "b"}]},
              {"name": "h2", "nics": [{"name": "y", "switch": "b"}, {"name": "x", "switch": "a"}]}],
    "links": [{"a": "s1", "b": "a"}, {"a": "s1", "b": "b"}]})");
  ASSERT_TRUE(f) << f.status().message();
  auto order = rank(*f, allocation_all(*f), RankAlgo::kAuto);
  ASSERT_TRUE(order);
  EXPECT_EQ(names(*f, *order), (std::vector<std::string>{"h1:x", "h1:y", "h2:x", "h2:y"}));
}

TEST(RailOrder, AutoPicksRailOnMultiPlaneClosAndLeafSetsOnSinglePlaneClos) {
  auto two = topo::build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 2, .nics_per_host = 2, .planes = 2});
  auto one = topo::build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 2, .nics_per_host = 2});
  ASSERT_TRUE(two && one);
  EXPECT_EQ(*rank(*two, allocation_all(*two), RankAlgo::kAuto), *rank(*two, allocation_all(*two), RankAlgo::kRail));
  EXPECT_EQ(names(*two, *rank(*two, allocation_all(*two), RankAlgo::kAuto)).front(), "h1-1:eth0p0");
  EXPECT_EQ(names(*two, *rank(*two, allocation_all(*two), RankAlgo::kAuto))[3], "h1-1:eth1p1");
  EXPECT_EQ(*rank(*one, allocation_all(*one), RankAlgo::kAuto), *rank(*one, allocation_all(*one), RankAlgo::kClos));
  EXPECT_EQ(parse_rank_algo("rail"), RankAlgo::kRail);
}

}  // namespace
}  // namespace weft::ranking
