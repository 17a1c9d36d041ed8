// Rail-optimised and multi-plane fabrics: what topo gen builds, and that a
// file round-trips unchanged.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <set>

#include "weft/topology/builders.h"
#include "weft/topology/topology_file.h"

namespace weft::topo {
namespace {

struct RailCase {
  int hosts, nics, leaves_per_rail, spines, planes;
  std::vector<int> leaf_of_host;  // 1-based rail leaf of each host, the same on every rail
};

std::string plane_prefix(int planes, int k) { return planes == 1 ? "" : fmt::format("pl{}-", k + 1); }

class RailBuilder : public ::testing::TestWithParam<RailCase> {};

TEST_P(RailBuilder, PutsPortKOfNicGOfEveryHostOnRailGOfPlaneK) {
  const auto c = GetParam();
  auto f = build_rail({.hosts = c.hosts, .nics_per_host = c.nics, .leaves_per_rail = c.leaves_per_rail,
                       .spines = c.spines, .planes = c.planes});
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->kind, FabricKind::kRail);
  EXPECT_EQ(f->num_rails(), c.nics);
  EXPECT_EQ(f->num_planes(), c.planes > 1 ? c.planes : 0);
  EXPECT_EQ(f->switches.size(), static_cast<size_t>(c.planes * (c.spines + c.nics * c.leaves_per_rail)));
  EXPECT_EQ(f->hosts.size(), static_cast<size_t>(c.hosts));
  EXPECT_EQ(f->nics.size(), static_cast<size_t>(c.hosts * c.nics * c.planes));
  EXPECT_EQ(f->links.size(),
            static_cast<size_t>(c.planes * c.spines * c.nics * c.leaves_per_rail + c.hosts * c.nics * c.planes));
  ASSERT_EQ(c.leaf_of_host.size(), static_cast<size_t>(c.hosts));
  for (int h = 0; h < c.hosts; ++h) {
    const Host& host = f->hosts[static_cast<size_t>(h)];
    EXPECT_EQ(host.name, fmt::format("h{}", h + 1));
    ASSERT_EQ(host.nics.size(), static_cast<size_t>(c.nics * c.planes));
    for (int k = 0; k < c.planes; ++k) {
      for (int g = 0; g < c.nics; ++g) {
        const int n = host.nics[static_cast<size_t>(k * c.nics + g)];
        EXPECT_EQ(f->nics[n].name, c.planes == 1 ? fmt::format("eth{}", g) : fmt::format("eth{}p{}", g, k));
        EXPECT_EQ(f->nics[n].gpus, std::vector<int>{g});
        EXPECT_EQ(f->nic_rail(n), g);
        EXPECT_EQ(f->nic_plane(n), c.planes > 1 ? k : -1);
        EXPECT_EQ(f->switches[f->nic_switch(n)].name,
                  fmt::format("{}r{}-l{}", plane_prefix(c.planes, k), g + 1, c.leaf_of_host[static_cast<size_t>(h)]));
        EXPECT_EQ(f->link_rail(f->nic_link(n)), g);
      }
    }
  }
  // Every leaf reaches exactly the spines of its own plane.
  for (size_t s = 0; s < f->switches.size(); ++s) {
    const Switch& sw = f->switches[s];
    std::set<std::string> up;
    for (const auto& adj : f->switch_neighbours(static_cast<int>(s))) {
      EXPECT_EQ(f->switches[adj.sw].plane, sw.plane) << sw.name;
      EXPECT_EQ(f->link_plane(adj.link), sw.plane);
      up.insert(f->switches[adj.sw].name);
    }
    if (sw.tier == kTierLeaf) {
      std::set<std::string> spines;
      for (int i = 1; i <= c.spines; ++i) spines.insert(fmt::format("{}s{}", plane_prefix(c.planes, std::max(0, sw.plane)), i));
      EXPECT_EQ(up, spines) << sw.name;
    } else {
      EXPECT_EQ(sw.rail, -1) << "spines join the rails";
      EXPECT_EQ(up.size(), static_cast<size_t>(c.nics * c.leaves_per_rail));
    }
  }
}

TEST_P(RailBuilder, LoadsBackFromItsFileUnchanged) {
  const auto c = GetParam();
  auto f = build_rail({.hosts = c.hosts, .nics_per_host = c.nics, .leaves_per_rail = c.leaves_per_rail,
                       .spines = c.spines, .planes = c.planes});
  ASSERT_TRUE(f) << f.status().message();
  const std::string text = topology_to_json(*f);
  auto back = parse_topology(text);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(topology_to_json(*back), text);
  EXPECT_EQ(back->num_rails(), f->num_rails());
  EXPECT_EQ(back->num_planes(), f->num_planes());
}

std::vector<RailCase> rail_cases() {
  std::vector<RailCase> out;
  for (int g : {2, 4, 8}) {
    for (int p : {1, 2}) {
      out.push_back({3, g, 1, 2, p, {1, 1, 1}});
      out.push_back({7, g, 2, 3, p, {1, 1, 1, 1, 2, 2, 2}});
      out.push_back({7, g, 3, 1, p, {1, 1, 1, 2, 2, 3, 3}});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, RailBuilder, ::testing::ValuesIn(rail_cases()), [](const auto& tp) {
  const auto& c = tp.param;
  return fmt::format("H{}G{}R{}S{}P{}", c.hosts, c.nics, c.leaves_per_rail, c.spines, c.planes);
});

class Clos2Planes : public ::testing::TestWithParam<int> {};

TEST_P(Clos2Planes, CopiesSpinesAndLeavesPerPlaneAndPutsPortKOnPlaneK) {
  const int planes = GetParam();
  auto f = build_clos2({.spines = 2, .leaves = 3, .hosts_per_leaf = 3, .nics_per_host = 2, .planes = planes});
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->kind, FabricKind::kClos2);
  EXPECT_EQ(f->switches.size(), static_cast<size_t>(planes * 5));
  EXPECT_EQ(f->nics.size(), static_cast<size_t>(9 * 2 * planes));
  EXPECT_EQ(f->links.size(), static_cast<size_t>(planes * (6 + 18)));
  EXPECT_EQ(f->num_planes(), planes > 1 ? planes : 0);
  EXPECT_EQ(f->num_rails(), 0);
  const std::string last_port = planes == 1 ? "eth1" : fmt::format("eth1p{}", planes - 1);
  auto nic = f->find_nic("h3-2:" + last_port);
  ASSERT_TRUE(nic);
  EXPECT_EQ(f->nics[*nic].index_on_host, 2 * planes - 1);
  EXPECT_EQ(f->switches[f->nic_switch(*nic)].name, plane_prefix(planes, planes - 1) + "l3");
  auto spine = f->find_switch(plane_prefix(planes, planes - 1) + "s2");
  ASSERT_TRUE(spine);
  EXPECT_EQ(f->switches[*spine].id, 2 * planes) << "DSCP ids stay unique across planes";
  auto back = parse_topology(topology_to_json(*f));
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(topology_to_json(*back), topology_to_json(*f));
}

INSTANTIATE_TEST_SUITE_P(Planes, Clos2Planes, ::testing::Values(1, 2, 4));

}  // namespace
}  // namespace weft::topo
