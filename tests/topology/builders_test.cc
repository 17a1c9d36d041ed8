#include <gtest/gtest.h>

#include <limits>
#include <set>

#include <fmt/format.h>

#include "weft/topology/builders.h"

namespace weft::topo {
namespace {

struct ClosCase {
  int s, l, h, g;
};

class Clos2Builder : public ::testing::TestWithParam<ClosCase> {};

TEST_P(Clos2Builder, HasEveryLeafLinkedToEverySpineAndEveryNicOnItsHostsLeaf) {
  const auto c = GetParam();
  auto f = build_clos2({.spines = c.s, .leaves = c.l, .hosts_per_leaf = c.h, .nics_per_host = c.g});
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->kind, FabricKind::kClos2);
  EXPECT_EQ(f->switches.size(), static_cast<size_t>(c.s + c.l));
  EXPECT_EQ(f->hosts.size(), static_cast<size_t>(c.l * c.h));
  EXPECT_EQ(f->nics.size(), static_cast<size_t>(c.l * c.h * c.g));
  EXPECT_EQ(f->links.size(), static_cast<size_t>(c.s * c.l + c.l * c.h * c.g));
  for (int l = 1; l <= c.l; ++l) {
    auto leaf = f->find_switch("l" + std::to_string(l));
    ASSERT_TRUE(leaf);
    EXPECT_EQ(f->switches[*leaf].tier, kTierLeaf);
    EXPECT_EQ(f->switch_neighbours(*leaf).size(), static_cast<size_t>(c.s));
    EXPECT_EQ(f->switch_nics(*leaf).size(), static_cast<size_t>(c.h * c.g));
    for (int s = 1; s <= c.s; ++s) {
      auto spine = f->find_switch("s" + std::to_string(s));
      ASSERT_TRUE(spine);
      EXPECT_EQ(f->switches[*spine].id, s) << "spine id is the DSCP rewrite offset";
      EXPECT_TRUE(f->link_between(f->switch_vertex(*leaf), f->switch_vertex(*spine)));
    }
  }
  auto nic = f->find_nic("h" + std::to_string(c.l) + "-" + std::to_string(c.h) + ":eth" + std::to_string(c.g - 1));
  ASSERT_TRUE(nic);
  EXPECT_EQ(f->switches[f->nic_switch(*nic)].name, "l" + std::to_string(c.l));
}

INSTANTIATE_TEST_SUITE_P(Sizes, Clos2Builder,
                         ::testing::Values(ClosCase{1, 1, 1, 1}, ClosCase{4, 4, 4, 1}, ClosCase{3, 5, 7, 2},
                                           ClosCase{8, 13, 3, 4}, ClosCase{2, 1, 6, 3}));

TEST(Clos3Builder, WiresAggregationKOfEveryPodToCorePlaneK) {
  auto f = build_clos3({.pods = 3, .leaves_per_pod = 2, .aggs_per_pod = 2, .cores = 4, .hosts_per_leaf = 3});
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->hosts.size(), 18u);
  EXPECT_EQ(f->switches.size(), 4u + 3 * (2 + 2));
  EXPECT_EQ(f->num_tiers(), 3);
  auto a2 = f->find_switch("p3-a2");
  ASSERT_TRUE(a2);
  EXPECT_EQ(f->switches[*a2].pod, 2);
  std::set<std::string> up;
  for (const auto& adj : f->switch_neighbours(*a2)) up.insert(f->switches[adj.sw].name);
  EXPECT_EQ(up, (std::set<std::string>{"c3", "c4", "p3-l1", "p3-l2"}));
}

TEST(Clos3Builder, RejectsCoresNotAMultipleOfAggs) {
  auto f = build_clos3({.pods = 2, .leaves_per_pod = 2, .aggs_per_pod = 3, .cores = 4, .hosts_per_leaf = 1});
  ASSERT_FALSE(f);
  EXPECT_NE(f.status().message().find("multiple of --aggs"), std::string::npos) << f.status().message();
}

TEST(BiGraphBuilder, LinksEveryUpperSwitchToEveryLowerAndNoneWithinAPart) {
  auto f = build_bigraph({.switches = 8, .subnodes = 3});
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->nics.size(), 24u);
  int cross = 0;
  for (const auto& l : f->links) {
    if (!f->is_switch_vertex(l.a) || !f->is_switch_vertex(l.b)) continue;
    auto pa = f->switches[f->vertex_switch(l.a)].part, pb = f->switches[f->vertex_switch(l.b)].part;
    EXPECT_NE(pa, pb);
    ++cross;
  }
  EXPECT_EQ(cross, 16);
  EXPECT_EQ(f->switches[*f->find_switch("u1")].part, Part::kUpper);
  EXPECT_EQ(f->switches[*f->find_switch("w4")].part, Part::kLower);
}

TEST(BiGraphBuilder, RejectsAnOddSwitchCount) {
  auto f = build_bigraph({.switches = 7, .subnodes = 2});
  ASSERT_FALSE(f);
  EXPECT_NE(f.status().message().find("even"), std::string::npos);
}

TEST(Clos2Builder, RejectsZeroSizesNamingTheFlag) {
  auto f = build_clos2({.spines = 0, .leaves = 2, .hosts_per_leaf = 2});
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().message(), "--spines must be >= 1 (got 0)");
}

// An infinite rate would be written as JSON null: a file no weft reads back.
class Clos2BuilderRates : public ::testing::TestWithParam<double> {};

TEST_P(Clos2BuilderRates, RejectsARateThatIsNotFiniteAndPositive) {
  auto f = build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 2, .fabric_gbps = GetParam()});
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().message(),
            fmt::format("fabric link rate must be finite and > 0 Gbit/s (got {})", GetParam()));
  auto g = build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 2, .access_gbps = GetParam()});
  ASSERT_FALSE(g);
  EXPECT_EQ(g.status().message(),
            fmt::format("access link rate must be finite and > 0 Gbit/s (got {})", GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Rates, Clos2BuilderRates,
                         ::testing::Values(std::numeric_limits<double>::infinity(),
                                           -std::numeric_limits<double>::infinity(),
                                           std::numeric_limits<double>::quiet_NaN(), 0.0, -25.0));

}  // namespace
}  // namespace weft::topo
