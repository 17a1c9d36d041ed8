// Which port of a multi-plane NIC a flow arrives at (routing/weft/routing/
// planes.h): the destination NIC's port on the source's plane, the NIC being
// known by the GPUs its ports are bound to; and no port at all, never another
// NIC's, where the destination NIC lacks one on that plane.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <regex>
#include <string>

#include "weft/routing/planes.h"
#include "weft/topology/builders.h"
#include "weft/topology/topology_file.h"

namespace weft::routing {
namespace {

struct CarrierShape {
  int nics;
  int planes;
};

void PrintTo(const CarrierShape& c, std::ostream* os) { *os << c.nics << " NICs x " << c.planes << " planes"; }

// (NIC index g, port k) from a generated port name "eth<g>p<k>".
std::pair<int, int> carrier_nic_and_port(const std::string& name) {
  static const std::regex kPort(R"(eth(\d+)p(\d+))");
  std::smatch m;
  if (!std::regex_match(name, m, kPort)) return {-1, -1};
  return {std::stoi(m[1]), std::stoi(m[2])};
}

// The fabric as its JSON, edited by `edit`, loaded again (names, not
// indices, tie NICs to links there).
topo::Fabric carrier_edited(const topo::Fabric& f, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(topo::topology_to_json(f));
  edit(j);
  auto g = topo::parse_topology(j.dump());
  EXPECT_TRUE(g) << g.status().message();
  return g ? std::move(*g) : topo::Fabric{};
}

// Removes port `nic` of host `host` and its access link.
void carrier_drop_port(nlohmann::json& j, const std::string& host, const std::string& nic) {
  for (auto& h : j["hosts"]) {
    if (h["name"] != host) continue;
    auto& nics = h["nics"];
    for (auto it = nics.begin(); it != nics.end(); ++it) {
      if ((*it)["name"] == nic) {
        nics.erase(it);
        break;
      }
    }
  }
  auto& links = j["links"];
  for (auto it = links.begin(); it != links.end(); ++it) {
    if ((*it)["a"] == host + ":" + nic || (*it)["b"] == host + ":" + nic) {
      links.erase(it);
      break;
    }
  }
}

int carrier_nic(const topo::Fabric& f, const std::string& qualified) {
  auto n = f.find_nic(qualified);
  EXPECT_TRUE(n.has_value()) << qualified;
  return n.value_or(-1);
}

class PlaneCarrierGenerated : public ::testing::TestWithParam<CarrierShape> {};

// Every (source port, destination port) pair of 3 hosts: the flow arrives
// at port k_src of the destination's NIC g_dst, with or without the GPU
// binding (without it, ports are matched by position alone).
TEST_P(PlaneCarrierGenerated, EveryFlowArrivesAtItsDestinationNicsPortOnTheSourcesPlane) {
  const auto [nics, planes] = GetParam();
  auto built = topo::build_clos2({.spines = 2, .leaves = 3, .hosts_per_leaf = 1, .nics_per_host = nics, .planes = planes});
  ASSERT_TRUE(built) << built.status().message();
  const topo::Fabric unbound = carrier_edited(*built, [](nlohmann::json& j) {
    for (auto& h : j["hosts"])
      for (auto& n : h["nics"]) n.erase("gpus");
  });
  for (const topo::Fabric* f : {static_cast<const topo::Fabric*>(&*built), &unbound}) {
    ASSERT_EQ(f->nics.size(), static_cast<size_t>(3 * nics * planes));
    for (int s = 0; s < static_cast<int>(f->nics.size()); ++s) {
      for (int d = 0; d < static_cast<int>(f->nics.size()); ++d) {
        const auto [gs, ks] = carrier_nic_and_port(f->nics[static_cast<size_t>(s)].name);
        const int gd = carrier_nic_and_port(f->nics[static_cast<size_t>(d)].name).first;
        const int c = plane_carrier(*f, s, d);
        ASSERT_GE(c, 0) << f->nic_qualified_name(s) << " -> " << f->nic_qualified_name(d);
        const std::string host = f->hosts[static_cast<size_t>(f->nics[static_cast<size_t>(d)].host)].name;
        EXPECT_EQ(f->nic_qualified_name(c), fmt::format("{}:eth{}p{}", host, gd, ks))
            << f->nic_qualified_name(s) << " -> " << f->nic_qualified_name(d) << (f == &unbound ? " (no GPUs)" : "");
        EXPECT_EQ(c == s, f->nics[static_cast<size_t>(s)].host == f->nics[static_cast<size_t>(d)].host && gs == gd);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PlaneCarrierGenerated,
                         ::testing::Values(CarrierShape{1, 2}, CarrierShape{2, 2}, CarrierShape{3, 2}, CarrierShape{2, 3},
                                           CarrierShape{5, 3}));

// A NIC without its plane-1 port (h1-2:eth0p1 gone): flows of plane 1 to
// that NIC have no carrier. By position alone they landed on the host's
// other NIC (eth1p1), and a flow from eth1p1 to eth0p0 of the same host
// counted as in-NIC; the other NIC's ports still match.
TEST(PlaneCarrier, ANicWithoutAPortOnThePlaneHasNoCarrierThereNotAnotherNicsPort) {
  auto built = topo::build_clos2({.spines = 1, .leaves = 1, .hosts_per_leaf = 2, .nics_per_host = 2, .planes = 2});
  ASSERT_TRUE(built) << built.status().message();
  for (bool gpus : {true, false}) {
    const topo::Fabric f = carrier_edited(*built, [&](nlohmann::json& j) {
      carrier_drop_port(j, "h1-2", "eth0p1");
      if (!gpus)
        for (auto& h : j["hosts"])
          for (auto& n : h["nics"]) n.erase("gpus");
    });
    ASSERT_EQ(f.nics.size(), 7u);
    SCOPED_TRACE(gpus ? "GPUs bound" : "no GPUs");
    EXPECT_EQ(plane_carrier(f, carrier_nic(f, "h1-1:eth0p1"), carrier_nic(f, "h1-2:eth0p0")), -1);
    EXPECT_EQ(plane_carrier(f, carrier_nic(f, "h1-2:eth1p1"), carrier_nic(f, "h1-2:eth0p0")), -1);
    // Same plane: the destination itself.
    EXPECT_EQ(plane_carrier(f, carrier_nic(f, "h1-1:eth0p0"), carrier_nic(f, "h1-2:eth0p0")),
              carrier_nic(f, "h1-2:eth0p0"));
    // Towards the NIC that lost a port, from plane 0: its plane-0 port is
    // the destination port itself.
    EXPECT_EQ(plane_carrier(f, carrier_nic(f, "h1-1:eth1p0"), carrier_nic(f, "h1-2:eth0p0")),
              carrier_nic(f, "h1-2:eth0p0"));
    if (gpus) {
      // NIC 1 keeps both ports, matched by its GPU.
      EXPECT_EQ(plane_carrier(f, carrier_nic(f, "h1-1:eth0p1"), carrier_nic(f, "h1-2:eth1p0")),
                carrier_nic(f, "h1-2:eth1p1"));
    } else {
      // Without a binding, plane 0 holds two ports of h1-2 and plane 1 one:
      // which NIC that one belongs to is unknown, so none is guessed.
      EXPECT_EQ(plane_carrier(f, carrier_nic(f, "h1-1:eth0p1"), carrier_nic(f, "h1-2:eth1p0")), -1);
    }
  }
}

}  // namespace
}  // namespace weft::routing
