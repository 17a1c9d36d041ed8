// Rail and plane fabrics that break the rules (fabric.h) are refused with one
// message that says what is wrong.
#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "weft/topology/builders.h"
#include "weft/topology/topology_file.h"

namespace weft::topo {
namespace {

using json = nlohmann::json;

json& switch_named(json& j, const std::string& name) {
  for (auto& s : j["switches"]) {
    if (s["name"] == name) return s;
  }
  throw std::runtime_error("no switch " + name);
}

json& host_named(json& j, const std::string& name) {
  for (auto& h : j["hosts"]) {
    if (h["name"] == name) return h;
  }
  throw std::runtime_error("no host " + name);
}

struct BadRailFile {
  const char* name;
  int planes;
  std::function<void(json&)> edit;
  const char* error;
};

class RailBadFile : public ::testing::TestWithParam<BadRailFile> {};

TEST_P(RailBadFile, IsRefusedWithOneMessage) {
  const auto& c = GetParam();
  auto f = build_rail({.hosts = 3, .nics_per_host = 2, .leaves_per_rail = 1, .spines = 2, .planes = c.planes});
  ASSERT_TRUE(f) << f.status().message();
  json j = json::parse(topology_to_json(*f));
  // Access links are implied by each NIC's "switch"; drop them so that an
  // edited NIC is judged by the rail and plane rules alone.
  json links = json::array();
  for (auto& l : j["links"]) {
    if (l["a"].get<std::string>().find(':') == std::string::npos) links.push_back(l);
  }
  j["links"] = links;
  ASSERT_TRUE(parse_topology(j.dump())) << "the unedited file must load";
  c.edit(j);
  auto bad = parse_topology(j.dump());
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(), c.error);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RailBadFile,
    ::testing::Values(
        BadRailFile{"HostMissesARail", 1, [](json& j) { host_named(j, "h2")["nics"].erase(1); },
                "host 'h2' has no NIC on rail 1: a rail fabric puts NIC g of every host on rail g"},
        BadRailFile{"HostMissesARailOfOnePlane", 2, [](json& j) { host_named(j, "h2")["nics"].erase(1); },
                "host 'h2' has no NIC on rail 1 of plane 0: a rail fabric puts NIC g of every host on rail g"},
        BadRailFile{"HostHasTwoNicsOnOneRail", 2,
                [](json& j) {
                  auto& n = host_named(j, "h2")["nics"][1];
                  n["switch"] = "pl1-r1-l1";
                  n.erase("rail");
                },
                "host 'h2' has two NICs on rail 0 of plane 0: h2:eth0p0 and h2:eth1p0"},
        BadRailFile{"HostMissesAPlane", 2,
                [](json& j) {
                  auto& nics = host_named(j, "h3")["nics"];
                  nics.erase(3);
                  nics.erase(2);
                },
                "host 'h3' has no NIC on plane 1: port k of every NIC sits on plane k"},
        BadRailFile{"PlanesShareASwitch", 2,
                [](json& j) { j["links"].push_back({{"a", "pl1-s1"}, {"b", "pl2-r1-l1"}}); },
                "link pl1-s1 - pl2-r1-l1 joins plane 0 and plane 1: planes share no switch and no link"},
        BadRailFile{"NicStatesAnotherPlaneThanItsSwitch", 2,
                [](json& j) { host_named(j, "h1")["nics"][2]["plane"] = 0; },
                "/hosts/0/nics/2/plane: 0 but its switch 'pl2-r1-l1' is on plane 1: planes share no switch"},
        BadRailFile{"NicStatesAnotherRailThanItsSwitch", 1,
                [](json& j) { host_named(j, "h3")["nics"][0]["rail"] = 1; },
                "/hosts/2/nics/0/rail: 1 but its switch 'r1-l1' is on rail 0"},
        BadRailFile{"SwitchWithoutAPlane", 2, [](json& j) { switch_named(j, "pl2-s2").erase("plane"); },
                "switch 'pl2-s2' has no plane: every switch of a multi-plane fabric belongs to exactly one plane"},
        BadRailFile{"PlaneNumbersWithAGap", 2,
                [](json& j) {
                  for (auto& s : j["switches"]) {
                    if (s["plane"] == 1) s["plane"] = 2;
                  }
                },
                "no switch is on plane 1 but one is on plane 2: number planes 0, 1, 2, ..."},
        BadRailFile{"RailOnASpine", 1, [](json& j) { switch_named(j, "s1")["rail"] = 0; },
                "switch 's1' (tier 1) has rail 0: only leaves (tier 0) belong to a rail"},
        BadRailFile{"RailsInAClosFabric", 1, [](json& j) { j["kind"] = "clos2"; },
                "switch 'r1-l1' has rail 0 but the fabric's kind is 'clos2': rails need kind 'rail'"},
        BadRailFile{"LeafWithoutARail", 1, [](json& j) { switch_named(j, "r2-l1").erase("rail"); },
                "leaf 'r2-l1' has no rail: every leaf of a rail fabric belongs to one rail"},
        BadRailFile{"NegativePlane", 2, [](json& j) { switch_named(j, "pl1-s1")["plane"] = -2; },
                "/switches/0/plane: -2 must be >= 0"}),
    [](const auto& tp) { return std::string(tp.param.name); });

struct BadSpec {
  const char* name;
  RailSpec spec;
  const char* error;
};

class RailBadSpec : public ::testing::TestWithParam<BadSpec> {};

TEST_P(RailBadSpec, IsRefusedNamingTheOption) {
  auto f = build_rail(GetParam().spec);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().message(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RailBadSpec,
    ::testing::Values(BadSpec{"NoHosts", {.hosts = 0}, "--hosts must be >= 1 (got 0)"},
                      BadSpec{"NegativeNics", {.nics_per_host = -1}, "--nics must be >= 1 (got -1)"},
                      BadSpec{"NoRailLeaves", {.leaves_per_rail = 0}, "--rail-leaves must be >= 1 (got 0)"},
                      BadSpec{"NoSpines", {.spines = 0}, "--spines must be >= 1 (got 0)"},
                      BadSpec{"NoPlanes", {.planes = 0}, "--planes must be >= 1 (got 0)"},
                      BadSpec{"MoreRailLeavesThanHosts", {.hosts = 3, .leaves_per_rail = 4},
                              "--rail-leaves (4) must be <= --hosts (3): every rail leaf needs a host"}),
    [](const auto& tp) { return std::string(tp.param.name); });

TEST(Clos2Planes, ZeroOrNegativePlanesAreRefused) {
  for (int p : {0, -2}) {
    auto f = build_clos2({.planes = p});
    ASSERT_FALSE(f);
    EXPECT_EQ(f.status().message(), "--planes must be >= 1 (got " + std::to_string(p) + ")");
  }
}

}  // namespace
}  // namespace weft::topo
