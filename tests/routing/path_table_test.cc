// ECMP models and the model path table: the contract every path table keeps
// (routing/weft/routing/path_table.h), checked on the model.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <set>

#include "weft/routing/path_table.h"
#include "weft/routing/router.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

Result<PairRoutes> ports_of(PathTable& t, const PairQuery& q, PortRange r, int max_ports) {
  PairRoutes out;
  WEFT_RETURN_IF_ERROR(t.ports(q, r, max_ports, out));
  return out;
}

TEST(SipHash, MatchesTheReferenceVector) {
  // Aumasson & Bernstein, SipHash paper appendix A: key 00..0f, message 00..0e.
  std::array<uint8_t, 15> msg{};
  for (size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(internal::siphash24(msg.data(), msg.size(), 0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull),
            0xa129ca6149be45e5ull);
}

TEST(EcmpHash, UnknownModelIsAnErrorNamingTheModels) {
  auto h = make_hash("jenkins", 1);
  ASSERT_FALSE(h);
  EXPECT_EQ(h.status().message(), "unknown hash model 'jenkins' (crc32, crc32-qp, linux-l4, linux-l3)");
}

TEST(EcmpHash, ValuesArePinnedSoASimulatedFabricNeverChangesUnnoticed) {
  FiveTuple t{0x0a000001, 0x0a000102, kProtoUdp, 49152, kRoceV2Port};
  EXPECT_EQ(make_hash("crc32", 1).value()->hash(t, 3), 2855426940u);
  EXPECT_EQ(make_hash("linux-l4", 12345).value()->hash(t, 3), 4006720834u);
  EXPECT_EQ(make_hash("linux-l3", 12345).value()->hash(t, 3), 1736905596u);
}

TEST(EcmpHash, LinuxHashIsSymmetricLikeTheKernels) {
  auto h = make_hash("linux-l4", 12345).value();
  FiveTuple ab{0x0a000001, 0x0a000102, kProtoTcp, 50000, 29500};
  FiveTuple ba{0x0a000102, 0x0a000001, kProtoTcp, 29500, 50000};
  EXPECT_EQ(h->hash(ab, 0), h->hash(ba, 0));
  EXPECT_EQ(h->hash(ab, 0), h->hash(ab, 7)) << "one seed: every router hashes a flow alike";
  auto c = make_hash("crc32", 12345).value();
  EXPECT_NE(c->hash(ab, 0), c->hash(ab, 7)) << "crc32 mixes the switch into its seed";
}

TEST(EcmpHash, LinuxL3IgnoresPortsAndL4DoesNot) {
  auto l3 = make_hash("linux-l3", 9).value();
  auto l4 = make_hash("linux-l4", 9).value();
  FiveTuple a{0x0a000001, 0x0a000102, kProtoUdp, 49152, kRoceV2Port}, b = a;
  b.sport = 49153;
  EXPECT_EQ(l3->hash(a, 0), l3->hash(b, 0));
  EXPECT_NE(l4->hash(a, 0), l4->hash(b, 0));
}

class EcmpUniformity : public ::testing::TestWithParam<const char*> {};

TEST_P(EcmpUniformity, SpreadsSourcePortsEvenlyOverAwkwardNextHopCounts) {
  auto h = make_hash(GetParam(), 77).value();
  for (size_t n : {3u, 7u, 8u, 13u}) {
    std::vector<int> hits(n, 0);
    FiveTuple t{0x0a000001, 0x0a000305, kProtoUdp, 0, kRoceV2Port};
    const int ports = 16384;
    for (int p = 0; p < ports; ++p) {
      t.sport = static_cast<uint16_t>(49152 + p);
      ++hits[h->pick(t, 2, n)];
    }
    const double expect = static_cast<double>(ports) / static_cast<double>(n);
    for (size_t i = 0; i < n; ++i) {
      // 6 standard deviations of a binomial count: never trips by chance.
      EXPECT_NEAR(hits[i], expect, 6 * std::sqrt(expect)) << GetParam() << " next hop " << i << " of " << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EcmpUniformity, ::testing::Values("crc32", "linux-l4"));

TEST(PortRange, RejectsEmptyAndOutOfRangeWithTheRangeInTheMessage) {
  EXPECT_EQ(make_port_range(60000, 50000).status().message(), "port range 60000-50000 is empty (low end above high end)");
  EXPECT_EQ(make_port_range(0, 10).status().message(), "port range 0-10 is outside 1-65535");
  EXPECT_EQ(make_port_range(5, 70000).status().message(), "port range 5-70000 is outside 1-65535");
  auto r = make_port_range(7, 7);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->size(), 1u);
}

struct TableCase {
  const char* hash;
  int max_ports;
};

class ModelTable : public ::testing::TestWithParam<TableCase> {};

TEST_P(ModelTable, KeepsThePathTableContract) {
  auto f = topo::build_clos2({.spines = 5, .leaves = 3, .hosts_per_leaf = 7}).value();
  auto table = make_model_path_table(f, make_hash(GetParam().hash, 3).value(), 11);
  const PortRange range{50000, 50999};
  PathFinder pf(f);
  for (int s : {0, 6, 13}) {
    for (int d : {1, 7, 20}) {
      if (s == d) continue;
      PairQuery q{s, d, kProtoUdp, kRoceV2Port};
      auto pr = ports_of(*table, q, range, GetParam().max_ports);
      ASSERT_TRUE(pr) << pr.status().message();
      const size_t want = std::min<size_t>(range.size(), static_cast<size_t>(GetParam().max_ports));
      ASSERT_EQ(pr->ports.size(), want);
      std::set<uint16_t> sports;
      std::set<Route> distinct;
      for (size_t i = 0; i < pr->num_routes(); ++i) distinct.emplace(pr->route(i).begin(), pr->route(i).end());
      EXPECT_EQ(distinct.size(), pr->num_routes()) << "routes hold no duplicates";
      for (size_t i = 0; i < pr->ports.size(); ++i) {
        const PortRoute& p = pr->ports[i];
        EXPECT_TRUE(range.contains(p.sport));
        EXPECT_TRUE(sports.insert(p.sport).second) << "each port once";
        ASSERT_GE(p.route, 0);
        ASSERT_LT(static_cast<size_t>(p.route), pr->num_routes());
        const Route r(pr->route(static_cast<size_t>(p.route)).begin(), pr->route(static_cast<size_t>(p.route)).end());
        auto one = table->route({s, d, kProtoUdp, p.sport, kRoceV2Port});
        ASSERT_TRUE(one);
        EXPECT_EQ(*one, r) << "route() and ports() agree on sport " << p.sport;
        EXPECT_TRUE(route_path(pf, s, d, r)) << "a walk over links that are up";
        EXPECT_EQ(r.front(), f.nic_switch(s));
        EXPECT_EQ(r.back(), f.nic_switch(d));
        EXPECT_EQ(r.size(), f.nic_switch(s) == f.nic_switch(d) ? 1u : 3u);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ModelTable,
                         ::testing::Values(TableCase{"crc32", 64}, TableCase{"linux-l4", 13}, TableCase{"crc32", 5000},
                                           TableCase{"linux-l3", 64}));

// On 3 tiers the table numbers a pair's routes by their next-hop picks
// while there are at most 4,096 numbers (2 aggregation switches x a plane of
// 8 cores here) and tells them apart by a hash beyond (a plane of 4,096
// cores: 8,192 numbers); either way every port's route is the one route()
// walks, and the routes are distinct. E-ECMP pairs each port with a QPN.
struct Clos3TableCase {
  int cores;
  const char* hash;
};

class ModelTable3Tier : public ::testing::TestWithParam<Clos3TableCase> {};

TEST_P(ModelTable3Tier, EveryPortsRouteIsTheWalkedOne) {
  auto f = topo::build_clos3(
               {.pods = 2, .leaves_per_pod = 2, .aggs_per_pod = 2, .cores = GetParam().cores, .hosts_per_leaf = 2})
               .value();
  auto table = make_model_path_table(f, make_hash(GetParam().hash, 5).value(), 3);
  const std::array<uint32_t, 3> qpns{17, 4242, 0xABCDEF};
  size_t routes = 0;
  for (int s = 0; s < static_cast<int>(f.nics.size()); ++s) {
    for (int d = 0; d < static_cast<int>(f.nics.size()); ++d) {
      if (s == d) continue;
      PairQuery q{s, d, kProtoUdp, kRoceV2Port};
      q.dqpns = qpns;
      auto pr = ports_of(*table, q, PortRange{}, 300);
      ASSERT_TRUE(pr) << pr.status().message();
      ASSERT_EQ(pr->ports.size(), 300u);
      std::set<Route> distinct;
      for (size_t i = 0; i < pr->num_routes(); ++i) distinct.emplace(pr->route(i).begin(), pr->route(i).end());
      EXPECT_EQ(distinct.size(), pr->num_routes()) << "routes hold no duplicates";
      routes += pr->num_routes();
      for (const PortRoute& p : pr->ports) {
        ASSERT_LT(static_cast<size_t>(p.route), pr->num_routes());
        const auto rt = pr->route(static_cast<size_t>(p.route));
        auto one = table->route({s, d, kProtoUdp, p.sport, kRoceV2Port, table->hashes_qpn() ? qpns[p.qpn] : 0});
        ASSERT_TRUE(one);
        EXPECT_EQ(*one, Route(rt.begin(), rt.end())) << "sport " << p.sport << " from " << s << " to " << d;
      }
    }
  }
  // 8 pairs on one leaf (1 route each), 16 across leaves of a pod (2: one
  // per aggregation switch), 32 across pods (one per core of a plane and
  // aggregation switch: as many as the cores, of which 300 ports find most).
  EXPECT_GT(routes, 8u + 16u * 2u + 32u * std::min<size_t>(static_cast<size_t>(GetParam().cores) / 2, 100));
}

INSTANTIATE_TEST_SUITE_P(Cases, ModelTable3Tier,
                         ::testing::Values(Clos3TableCase{16, "crc32"}, Clos3TableCase{8192, "crc32"},
                                           Clos3TableCase{16, "crc32-qp"}, Clos3TableCase{8192, "crc32-qp"}));

TEST(ModelTable, LinuxL3GivesOnePathPerPairWhateverThePort) {
  auto f = topo::build_clos2({.spines = 8, .leaves = 2, .hosts_per_leaf = 1}).value();
  auto table = make_model_path_table(f, make_hash("linux-l3", 3).value());
  auto pr = ports_of(*table, {0, 1, kProtoUdp, kRoceV2Port}, PortRange{}, 64);
  ASSERT_TRUE(pr);
  EXPECT_EQ(pr->num_routes(), 1u);
  EXPECT_EQ(pr->ports.size(), 64u);
}

TEST(ModelTable, ReachesEverySpineAndNeverADownLink) {
  auto f = topo::build_clos2({.spines = 4, .leaves = 2, .hosts_per_leaf = 1}).value();
  auto l = f.link_between(f.switch_vertex(*f.find_switch("l1")), f.switch_vertex(*f.find_switch("s3")));
  ASSERT_TRUE(l);
  f.links[static_cast<size_t>(*l)].state = topo::LinkState::kDown;
  auto table = make_model_path_table(f, make_hash("crc32", 5).value());
  auto pr = ports_of(*table, {0, 1, kProtoUdp, kRoceV2Port}, PortRange{}, 256);
  ASSERT_TRUE(pr);
  std::set<std::string> spines;
  for (size_t i = 0; i < pr->num_routes(); ++i) spines.insert(f.switches[static_cast<size_t>(pr->route(i)[1])].name);
  EXPECT_EQ(spines, (std::set<std::string>{"s1", "s2", "s4"}));
}

TEST(ModelTable, BadNicsAreErrorsAndTheWholeRangeComesInOrder) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 1}).value();
  auto table = make_model_path_table(f, make_hash("crc32", 5).value());
  EXPECT_EQ(ports_of(*table, {0, 9, kProtoUdp, kRoceV2Port}, PortRange{}, 4).status().message(),
            "NIC index 0 -> 9 is not in the fabric");
  EXPECT_EQ(table->route({1, 1, kProtoUdp, 5, 6}).status().message(), "flow from h2-1:eth0 to itself");
  auto pr = ports_of(*table, {0, 1, kProtoTcp, 29500}, PortRange{100, 104}, 64);
  ASSERT_TRUE(pr);
  ASSERT_EQ(pr->ports.size(), 5u);
  for (uint16_t i = 0; i < 5; ++i) EXPECT_EQ(pr->ports[i].sport, 100 + i);
}

}  // namespace
}  // namespace weft::routing
