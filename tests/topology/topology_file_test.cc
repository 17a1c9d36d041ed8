#include <gtest/gtest.h>

#include "weft/topology/builders.h"
#include "weft/topology/topology_file.h"

namespace weft::topo {
namespace {

TEST(TopologyFile, NormalisedJsonLoadsBackToTheSameJson) {
  for (auto f : {build_clos2({.spines = 3, .leaves = 2, .hosts_per_leaf = 2, .nics_per_host = 2}),
                 build_clos3({.pods = 2, .leaves_per_pod = 2, .aggs_per_pod = 2, .cores = 2, .hosts_per_leaf = 1}),
                 build_bigraph({.switches = 4, .subnodes = 2})}) {
    ASSERT_TRUE(f);
    f->links[f->links.size() - 1].state = LinkState::kDown;  // states survive too
    std::string json = topology_to_json(*f);
    auto back = parse_topology(json);
    ASSERT_TRUE(back) << back.status().message();
    EXPECT_EQ(topology_to_json(*back), json);
    EXPECT_EQ(back->kind, f->kind);
  }
}

TEST(TopologyFile, MinimalHandWrittenFileLoads) {
  auto f = parse_topology(R"({
    "switches": [{"name": "s1", "tier": 1, "id": 1}, {"name": "l1"}, {"name": "l2"}],
    "hosts": [{"name": "a", "nics": [{"switch": "l1"}]},
              {"name": "b", "nics": [{"switch": "l2", "gbps": 25, "address": "10.0.2.1"}]}],
    "links": [{"a": "s1", "b": "l1"}, {"a": "s1", "b": "l2", "state": "down"}]})");
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->kind, FabricKind::kCustom);
  auto b = f->find_nic("b");
  ASSERT_TRUE(b);
  EXPECT_EQ(f->nics[*b].name, "eth0");
  EXPECT_EQ(f->nics[*b].address, "10.0.2.1");
  EXPECT_EQ(f->links[f->nic_link(*b)].gbps, 25);
  EXPECT_EQ(f->links[*f->link_between(f->switch_vertex(0), f->switch_vertex(2))].state, LinkState::kDown);
}

struct BadFile {
  const char* text;
  const char* error;
};

class TopologyFileErrors : public ::testing::TestWithParam<BadFile> {};

TEST_P(TopologyFileErrors, NameTheFieldOrLine) {
  auto f = parse_topology(GetParam().text);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().message(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TopologyFileErrors,
    ::testing::Values(
        BadFile{"{\n  \"switches\": [\n  ,\n]}",
                "parse error at line 3, column 3: syntax error while parsing value - unexpected ','; expected "
                "'[', '{', or a literal"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "a", "nics": [{"switch": "l9"}]}]})",
                "/hosts/0/nics/0/switch: unknown switch 'l9'"},
        BadFile{R"({"switches": [{"name": "l1", "tier": 5}], "hosts": []})", "/switches/0/tier: 5 is not 0, 1 or 2"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "a", "nics": [{"switch": "l1", "gbps": -1}]}]})",
                "/hosts/0/nics/0/gbps: must be finite and > 0 (got -1)"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "a", "nics": []}]})",
                "/hosts/0/nics: a host needs at least one NIC"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "a", "nics": [{"switch": "l1"}]},
                   {"name": "a", "nics": [{"switch": "l1"}]}]})",
                "/hosts/1/name: duplicate host 'a'"},
        BadFile{R"({"switches": [{"name": "l1"}, {"name": "s1"}], "hosts": [],
                   "links": [{"a": "l1", "b": "s1"}, {"a": "s1", "b": "l1"}]})",
                "two links between s1 and l1"},
        BadFile{R"({"version": 2, "switches": [], "hosts": []})", "/version: unsupported version 2 (this weft reads 1)"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [], "links": [{"a": "l1", "b": "x"}]})",
                "/links/0/b: unknown switch 'x'"},
        BadFile{R"({"switches": "no", "hosts": []})", "/switches: expected an array, got string"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "a", "nics": [{"switch": "l1", "address": "10.0.1"}]}]})",
                "/hosts/0/nics/0/address: '10.0.1' is not an IPv4 address (a dotted quad such as 10.0.1.1)"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "a", "nics": [{"switch": "l1", "address": "fe80::1"}]}]})",
                "/hosts/0/nics/0/address: 'fe80::1' is not an IPv4 address (a dotted quad such as 10.0.1.1)"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "a", "nics": [{"switch": "l1", "address": "10.0.1.1"}]},
                   {"name": "b", "nics": [{"switch": "l1", "address": "10.0.1.2"}, {"switch": "l1", "address": "10.0.1.1"}]}]})",
                "/hosts/1/nics/1/address: 10.0.1.1 is also the address of a:eth0: every NIC (every port of a "
                "multi-plane NIC) needs its own"},
        BadFile{R"({"switches": [{"name": "l1", "tier": 4294967297}], "hosts": []})",
                "/switches/0/tier: 4294967297 is out of range"},
        BadFile{R"({"switches": [{"name": "l1", "pod": -2147483649}], "hosts": []})",
                "/switches/0/pod: -2147483649 is out of range"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "a", "nics": [{"switch": "l1", "gpus": [4294967296]}]}]})",
                "/hosts/0/nics/0/gpus/0: expected a GPU index >= 0"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "a", "nics": [{"switch": "l1", "adress": "10.0.1.1"}]}]})",
                "/hosts/0/nics/0/adress: unknown field (known here: name, switch, gbps, state, gpus, address, rail, plane; "
                "a field starting with '_' is a comment)"},
        BadFile{R"({"switchs": [], "hosts": []})",
                "/switchs: unknown field (known here: version, name, kind, switches, hosts, links; a field starting "
                "with '_' is a comment)"},
        BadFile{R"({"switches": [{"name": "l1"}, {"name": "s1", "tier": 1}], "hosts": [],
                   "links": [{"a": "l1", "b": "s1", "status": "down"}]})",
                "/links/0/status: unknown field (known here: a, b, gbps, state; a field starting with '_' is a comment)"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "a", "nics": [{"switch": "l1", "gbps": 1e999}]}]})",
                "number overflow parsing '1e999'"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "a", "nics": [{"switch": "l1", "gbps": 25}]}],
                   "links": [{"a": "l1", "b": "a:eth0", "gbps": 100}]})",
                "/links/0/gbps: 100 but the NIC's own /hosts/0/nics/0/gbps is 25: state the rate once, or the same in "
                "both"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "#h1", "nics": [{"switch": "l1"}]}]})",
                "/hosts/0/name: '#h1': '#' is not allowed (letters, digits, '-', '.' and '_' are)"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "h1,h2", "nics": [{"switch": "l1"}]}]})",
                "/hosts/0/name: 'h1,h2': ',' is not allowed (letters, digits, '-', '.' and '_' are)"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "h1\nh2", "nics": [{"switch": "l1"}]}]})",
                "/hosts/0/name: 'h1\nh2': byte 0x0a is not allowed (letters, digits, '-', '.' and '_' are)"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "h1", "nics": [{"name": "e,0", "switch": "l1"}]}]})",
                "/hosts/0/nics/0/name: 'e,0': ',' is not allowed (letters, digits, '-', '.' and '_' are)"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "h1", "nics": [{"name": "e 0", "switch": "l1"}]}]})",
                "/hosts/0/nics/0/name: 'e 0': ' ' is not allowed (letters, digits, '-', '.' and '_' are)"},
        BadFile{R"({"switches": [{"name": "l1"}], "hosts": [{"name": "h1", "nics": [{"name": "", "switch": "l1"}]}]})",
                "/hosts/0/nics/0/name: a NIC's name must not be empty"}));

// An access link listed beside its NIC (as `weft topo show --json` writes
// it): down in either place is down, a rate given in one place holds.
TEST(TopologyFile, AnAccessLinkAndItsNicEachKeepWhatOnlyOneOfThemSays) {
  struct Case {
    const char* nic;
    const char* link;
    LinkState state;
    double gbps;
  };
  for (const Case& c : {Case{R"("state": "down")", "", LinkState::kDown, 100},
                        Case{"", R"(, "state": "down")", LinkState::kDown, 100},
                        Case{R"("state": "down")", R"(, "state": "up")", LinkState::kDown, 100},
                        Case{R"("state": "up")", R"(, "state": "down")", LinkState::kDown, 100},
                        Case{R"("state": "up")", R"(, "state": "up")", LinkState::kUp, 100},
                        Case{R"("state": "down", "gbps": 25)", R"(, "state": "down", "gbps": 25)", LinkState::kDown, 25},
                        Case{R"("gbps": 40)", "", LinkState::kUp, 40},
                        Case{"", R"(, "gbps": 40)", LinkState::kUp, 40}}) {
    const std::string text = std::string(R"({"switches": [{"name": "l1"}], "hosts": [{"name": "a", "nics": [{"switch": "l1")") +
                             (*c.nic ? ", " : "") + c.nic + R"(}]}], "links": [{"a": "a:eth0", "b": "l1")" + c.link + "}]}";
    auto f = parse_topology(text);
    ASSERT_TRUE(f) << text << ": " << f.status().message();
    const Link& l = f->links[f->nic_link(*f->find_nic("a:eth0"))];
    EXPECT_EQ(l.state, c.state) << text;
    EXPECT_EQ(l.gbps, c.gbps) << text;
  }
}

TEST(TopologyFile, FieldsStartingWithAnUnderscoreAreComments) {
  auto f = parse_topology(R"({"_comment": "lab", "switches": [{"name": "l1", "_rack": 3}],
                              "hosts": [{"name": "a", "_note": "x", "nics": [{"switch": "l1", "_port": "Eth1/1"}]}]})");
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->nics.size(), 1u);
}

TEST(TopologyFile, LoadNamesTheFileThatDoesNotExist) {
  auto f = load_topology("/nonexistent/fabric.json");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().message(), "cannot open /nonexistent/fabric.json: No such file or directory");
}

}  // namespace
}  // namespace weft::topo

namespace weft::topo {
namespace {

TEST(TopologyFile, EveryBundledExampleLoads) {
  for (const char* name : {"clos-4x4x4.json", "clos3-small.json", "bigraph-4x8.json", "lab-custom.json", "rail-3h-2r-2p.json"}) {
    auto f = load_topology(std::string(WEFT_SOURCE_DIR) + "/examples/topologies/" + name);
    EXPECT_TRUE(f) << name << ": " << f.status().message();
  }
}

}  // namespace
}  // namespace weft::topo
