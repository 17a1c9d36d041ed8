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
#include "weft/db/database.h"
#include "weft/topology/topology_file.h"

namespace weft::test {
namespace {

namespace fs = std::filesystem;

struct Shape {
  int planes, rails, hosts, spines, rail_leaves;  // spines per plane
  std::string gen_args() const {
    return fmt::format("--hosts {} --nics {} --spines {} --planes {} --rail-leaves {}", hosts, rails, spines, planes,
                       rail_leaves);
  }
};

class RailFabricNetns : public ::testing::TestWithParam<Shape> {
 protected:
  Result<std::unique_ptr<NetnsFabric>> build() const {
    const Shape s = GetParam();
    return NetnsFabric::create(FabricOptions::rail(s.planes, s.rails, s.hosts, s.spines, s.rail_leaves));
  }
  // Plane of a fabric leaf (the script numbers leaves plane by plane).
  int plane_of(const FabricHost& h) const { return (h.leaf - 1) / (GetParam().rails * GetParam().rail_leaves); }
};

std::string host_of(const FabricHost& h) { return h.name.substr(0, h.name.find(':')); }

TEST_P(RailFabricNetns, FlowsStayOnTheirPlaneAndCrossASpineOfItOnlyBetweenLeaves) {
  WEFT_SKIP_UNLESS_NETNS();
  const Shape sh = GetParam();
  auto fabric = build();
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  ASSERT_EQ(f.hosts().size(), static_cast<size_t>(sh.planes * sh.rails * sh.hosts));
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
      EXPECT_EQ((*spine)[i], 0) << what << ": one leaf";
    } else {
      EXPECT_GE((*spine)[i], plane_of(a) * sh.spines + 1) << what;
      EXPECT_LE((*spine)[i], plane_of(a) * sh.spines + sh.spines) << what;
      used.insert((*spine)[i]);
    }
  }
  EXPECT_EQ(used.size(), static_cast<size_t>(sh.planes * sh.spines)) << "5 ports a pair reach every spine";
}

// Addresses as the script's header has them: 10.0.<leaf>.<host>, leaves plane
// by plane, rail by rail, and hosts in contiguous blocks over a rail's leaves.
TEST(RailFabricNetnsAddresses, FollowTheLeafNumbering) {
  WEFT_SKIP_UNLESS_NETNS();
  auto fabric = NetnsFabric::create(FabricOptions::rail(2, 2, 5, 1, 2));
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  std::vector<std::string> got;
  for (const auto& h : (*fabric)->hosts()) {
    if (host_of(h) == "h3" || host_of(h) == "h4") got.push_back(h.name + "=" + h.ip);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"h3:eth0p0=10.0.1.3", "h3:eth1p0=10.0.3.3", "h3:eth0p1=10.0.5.3",
                                           "h3:eth1p1=10.0.7.3", "h4:eth0p0=10.0.2.4", "h4:eth1p0=10.0.4.4",
                                           "h4:eth0p1=10.0.6.4", "h4:eth1p1=10.0.8.4"}));
}

// Everything `weft topo gen rail` and `topo infer` must agree on, switch names
// aside (infer names switches by probe number): hosts and their NIC entries
// in order with plane and rail, each leaf as the NICs it holds, each spine as
// its probe id, plane and the leaves it links to (up).
std::string shape(const topo::Fabric& f) {
  std::map<int, std::string> leaf_key;  // switch -> its NICs
  for (size_t n = 0; n < f.nics.size(); ++n) {
    auto& k = leaf_key[f.nic_switch(static_cast<int>(n))];
    k += fmt::format("{}{}", k.empty() ? "" : ",", f.nic_qualified_name(static_cast<int>(n)));
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
  std::vector<std::string> spines, leaves;
  for (size_t s = 0; s < f.switches.size(); ++s) {
    const auto& sw = f.switches[s];
    if (sw.tier == topo::kTierLeaf) {
      leaves.push_back(fmt::format("leaf plane {} rail {} [{}]\n", sw.plane, sw.rail, leaf_key[static_cast<int>(s)]));
      continue;
    }
    std::vector<std::string> to;
    for (const auto& [leaf, key] : leaf_key) {
      auto l = f.link_between(f.switch_vertex(static_cast<int>(s)), f.switch_vertex(leaf));
      if (l && f.links[static_cast<size_t>(*l)].state == topo::LinkState::kUp) to.push_back(fmt::format("[{}]", key));
    }
    std::sort(to.begin(), to.end());
    spines.push_back(fmt::format("spine id {} tier {} plane {} to {}\n", sw.id, sw.tier, sw.plane, fmt::join(to, " ")));
  }
  std::sort(spines.begin(), spines.end());
  std::sort(leaves.begin(), leaves.end());
  return out + fmt::format("{}{}links {}\n", fmt::join(leaves, ""), fmt::join(spines, ""), f.links.size());
}

TEST_P(RailFabricNetns, TopoInferOfAProbeCampaignIsTheRailFabricTopoGenDescribes) {
  WEFT_SKIP_UNLESS_NETNS();
  auto fabric = build();
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  const fs::path dir = fs::temp_directory_path() / ("weft-railnet-" + f.prefix());  // the fleet's (agent_fleet.h)
  // One agent per NIC address, named "host:nic": the hosts file topo infer reads.
  auto fleet = AgentFleet::start(f, dir.string());
  ASSERT_TRUE(fleet) << fleet.status().to_string();
  const AgentFleet::Run run = (*fleet)->probe("--ports 8 --timeout-ms 100 --retries 1", 40000);
  ASSERT_TRUE(run.ok()) << "status " << run.status << ": " << run.err;

  const std::string weft = (*fleet)->weft(), db = (*fleet)->db_path();
  // Every probe between two hosts saw the spine the fabric routes its 5-tuple
  // through: a NIC's probes left on that NIC (source-address routing), and
  // none reached another plane.
  auto paths = load_paths(db, 1);
  ASSERT_TRUE(paths) << paths.status().to_string();
  std::vector<FiveTuple> tuples;
  std::vector<int> seen;
  std::map<std::string, std::string> host_of_ip;
  for (const auto& h : f.hosts()) host_of_ip[h.ip] = host_of(h);
  for (const auto& p : *paths) {
    if (host_of_ip.at(p.src_ip) == host_of_ip.at(p.dst_ip)) continue;  // delivered inside the host
    tuples.push_back({p.src_ip, p.dst_ip, 17, p.sport, p.dport});
    seen.push_back(p.answered > 0 ? p.spine : -1);
  }
  const size_t n = f.hosts().size(), per_host = static_cast<size_t>(GetParam().planes * GetParam().rails);
  ASSERT_EQ(tuples.size(), n * (n - per_host) * 8);
  auto truth = f.ground_truth(tuples);
  ASSERT_TRUE(truth) << truth.status().to_string();
  for (size_t i = 0; i < tuples.size(); ++i) {
    EXPECT_EQ(seen[i], (*truth)[i]) << tuples[i].src_ip << " -> " << tuples[i].dst_ip << " sport " << tuples[i].sport;
  }
  const std::string inferred = (dir / "inferred.json").string(), gen = (dir / "gen.json").string();
  {
    // Planes are no failure: no spine-leaf pair of two planes is named dead,
    // no pair of hosts of two planes unreachable.
    db::OpenOptions ro;
    ro.read_only = true;
    auto d = db::Database::open(db, ro);
    ASSERT_TRUE(d) << d.status().to_string();
    auto anomalies = d->query_int("SELECT COUNT(*) FROM anomalies");
    ASSERT_TRUE(anomalies) << anomalies.status().to_string();
    EXPECT_EQ(*anomalies, 0) << run.out;
  }
  auto infer = run_shell(fmt::format("{} topo infer --db {} -o {}", weft, db, inferred));
  ASSERT_TRUE(infer) << infer.status().to_string();
  auto made = run_shell(fmt::format("{} topo gen rail {} -o {}", weft, GetParam().gen_args(), gen));
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

// The dual-plane fabric of the acceptance; one plane with two leaves per rail
// and uneven blocks; four rails of one leaf.
INSTANTIATE_TEST_SUITE_P(Shapes, RailFabricNetns,
                         ::testing::Values(Shape{2, 2, 4, 2, 1}, Shape{1, 2, 5, 2, 2}, Shape{2, 4, 3, 1, 1}),
                         [](const auto& p) {
                           const Shape& s = p.param;
                           return fmt::format("p{}_g{}_h{}_s{}_r{}", s.planes, s.rails, s.hosts, s.spines,
                                              s.rail_leaves);
                         });

}  // namespace
}  // namespace weft::test
