// The rail-optimised multi-plane fabric of namespaces (scripts/netns-fabric.sh
// up-rail): what NIC g's address sends leaves on NIC g, a flow stays on its
// plane and crosses a spine of that plane only between rails; and a real UDP
// probe campaign over every NIC address lets `weft topo infer` recover exactly
// the fabric `weft topo gen rail` of the same shape describes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent_fleet.h"
#include "weft/topology/topology_file.h"

namespace weft::test {
namespace {

namespace fs = std::filesystem;

constexpr int kPlanes = 2, kRails = 2, kHosts = 4, kSpines = 2;  // spines per plane

// Plane and rail of a fabric leaf (the script numbers leaves plane by plane).
int plane_of(const FabricHost& h) { return (h.leaf - 1) / kRails; }
std::string host_of(const FabricHost& h) { return h.name.substr(0, h.name.find(':')); }

TEST(RailFabricNetns, FlowsStayOnTheirPlaneAndCrossASpineOfItOnlyBetweenRails) {
  WEFT_SKIP_UNLESS_NETNS();
  auto fabric = NetnsFabric::create(FabricOptions::rail(kPlanes, kRails, kHosts, kSpines));
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  ASSERT_EQ(f.hosts().size(), static_cast<size_t>(kPlanes * kRails * kHosts));
  EXPECT_EQ(f.host("h3:eth1p0").ip, "10.0.2.3");
  EXPECT_EQ(f.host("h4:eth0p1").ip, "10.0.3.4");
  std::vector<FiveTuple> tuples;
  std::vector<std::pair<const FabricHost*, const FabricHost*>> ends;
  for (const auto& a : f.hosts()) {
    for (const auto& b : f.hosts()) {
      if (host_of(a) == host_of(b)) continue;
      for (int p = 0; p < 5; ++p) {
        tuples.push_back({a.ip, b.ip, 17, 40000 + p, 4791});
        ends.push_back({&a, &b});
      }
    }
  }
  auto spine = f.ground_truth(tuples);
  ASSERT_TRUE(spine) << spine.status().to_string();
  std::set<int> used;
  for (size_t i = 0; i < tuples.size(); ++i) {
    const FabricHost &a = *ends[i].first, &b = *ends[i].second;
    const std::string what = a.name + " -> " + b.name;
    if (plane_of(a) != plane_of(b)) {
      EXPECT_EQ((*spine)[i], -1) << what << ": planes share no switch";
    } else if (a.leaf == b.leaf) {
      EXPECT_EQ((*spine)[i], 0) << what << ": one rail, one leaf";
    } else {
      EXPECT_GE((*spine)[i], plane_of(a) * kSpines + 1) << what;
      EXPECT_LE((*spine)[i], plane_of(a) * kSpines + kSpines) << what;
      used.insert((*spine)[i]);
    }
  }
  EXPECT_EQ(used, (std::set<int>{1, 2, 3, 4}));
}

// Everything `weft topo gen rail` and `topo infer` must agree on, switch names
// aside (infer names switches by probe number): hosts and their NIC entries
// in order with plane and rail, each leaf as the NICs it holds, each spine as
// its probe id, plane and the leaves it links to (up).
std::string shape(const topo::Fabric& f) {
  std::map<int, std::string> leaf_key;  // switch -> its NICs
  for (size_t n = 0; n < f.nics.size(); ++n) {
    auto& k = leaf_key[f.nic_switch(static_cast<int>(n))];
    k += (k.empty() ? "" : ",") + f.nic_qualified_name(static_cast<int>(n));
  }
  std::string out = fmt::format("kind {} planes {} rails {}\n", static_cast<int>(f.kind), f.num_planes(), f.num_rails());
  for (const auto& h : f.hosts) {
    out += h.name + ":";
    for (int n : h.nics) {
      const auto& nic = f.nics[static_cast<size_t>(n)];
      out += fmt::format(" {}#{}(plane {} rail {} leaf [{}])", nic.name, nic.index_on_host, f.nic_plane(n),
                         f.nic_rail(n), leaf_key[f.nic_switch(n)]);
    }
    out += "\n";
  }
  std::vector<std::string> spines;
  for (size_t s = 0; s < f.switches.size(); ++s) {
    const auto& sw = f.switches[s];
    if (sw.tier == topo::kTierLeaf) {
      out += fmt::format("leaf plane {} rail {} [{}]\n", sw.plane, sw.rail, leaf_key[static_cast<int>(s)]);
      continue;
    }
    std::vector<std::string> to;
    for (const auto& [leaf, key] : leaf_key) {
      auto l = f.link_between(f.switch_vertex(static_cast<int>(s)), f.switch_vertex(leaf));
      if (l && f.links[static_cast<size_t>(*l)].state == topo::LinkState::kUp) to.push_back(fmt::format("[{}]", key));
    }
    spines.push_back(fmt::format("spine id {} tier {} plane {} to {}\n", sw.id, sw.tier, sw.plane, fmt::join(to, " ")));
  }
  std::sort(spines.begin(), spines.end());
  return out + fmt::format("{}", fmt::join(spines, "")) + fmt::format("links {}\n", f.links.size());
}

TEST(RailFabricNetns, TopoInferOfAProbeCampaignIsTheRailFabricTopoGenDescribes) {
  WEFT_SKIP_UNLESS_NETNS();
  auto fabric = NetnsFabric::create(FabricOptions::rail(kPlanes, kRails, kHosts, kSpines));
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  const fs::path dir = fs::temp_directory_path() / ("weft-railnet-" + f.prefix());
  struct Cleanup {
    fs::path d;
    ~Cleanup() { fs::remove_all(d); }
  } cleanup{dir};
  // One agent per NIC address, named "host:nic": the hosts file topo infer reads.
  auto fleet = AgentFleet::start(f, dir.string());
  ASSERT_TRUE(fleet) << fleet.status().to_string();
  const AgentFleet::Run run = (*fleet)->probe("--ports 8 --timeout-ms 100 --retries 1", 40000);
  ASSERT_TRUE(run.ok()) << "status " << run.status << ": " << run.err;

  const std::string weft = (*fleet)->weft(), db = (*fleet)->db_path();
  const std::string inferred = (dir / "inferred.json").string(), gen = (dir / "gen.json").string();
  auto infer = run_shell(fmt::format("{} topo infer --db {} -o {}", weft, db, inferred));
  ASSERT_TRUE(infer) << infer.status().to_string();
  auto made = run_shell(fmt::format("{} topo gen rail --hosts {} --nics {} --spines {} --planes {} -o {}", weft, kHosts,
                                    kRails, kSpines, kPlanes, gen));
  ASSERT_TRUE(made) << made.status().to_string();
  auto got = topo::load_topology(inferred);
  ASSERT_TRUE(got) << got.status().to_string();
  auto want = topo::load_topology(gen);
  ASSERT_TRUE(want) << want.status().to_string();
  EXPECT_EQ(got->kind, topo::FabricKind::kRail);
  EXPECT_EQ(shape(*got), shape(*want));
  // Names and addresses of the NIC entries are the fabric's own.
  for (const auto& h : f.hosts()) {
    auto nic = got->find_nic(h.name);
    ASSERT_TRUE(nic) << h.name;
    EXPECT_EQ(got->nics[static_cast<size_t>(*nic)].address, h.ip) << h.name;
    EXPECT_TRUE(want->find_nic(h.name)) << h.name;
  }
}

}  // namespace
}  // namespace weft::test
