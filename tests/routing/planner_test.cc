// The route planner on fabrics small enough to reason about: load 1 where a
// colouring exists (checked by hashing the planned ports again and counting
// with the link-load checker), ports unique per host, the listen-port rule,
// and one-line errors for impossible inputs.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "weft/routing/link_load.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

struct Fixture {
  topo::Fabric f;
  ranking::RankOrder order;
};

Fixture clos(int spines, int leaves, int hosts, int nics = 1) {
  Fixture x{topo::build_clos2({.spines = spines, .leaves = leaves, .hosts_per_leaf = hosts, .nics_per_host = nics}).value(), {}};
  x.order = ranking::rank(x.f, ranking::allocation_all(x.f), ranking::RankAlgo::kClos).value();
  return x;
}

// Max load of every step when the fabric hashes the plan's ports (a fresh
// model table: nothing shared with the planner's).
std::vector<int> hashed_loads(const Fixture& x, const Schedule& s, const RoutePlan& plan, const char* hash, uint32_t seed) {
  auto table = make_model_path_table(x.f, make_hash(hash, seed).value());
  auto router = make_table_router(x.f, x.order, plan, *table);
  EXPECT_TRUE(router) << router.status().message();
  if (!router) return {};
  Schedule with_rounds = s;  // load per round, as the plan counts it
  EXPECT_TRUE(apply_plan_rounds(plan, with_rounds));
  auto rep = check_link_load(x.f, x.order, with_rounds, **router);
  EXPECT_TRUE(rep) << rep.status().message();
  std::vector<int> out;
  if (rep) {
    for (const auto& st : rep->steps) out.push_back(st.max_load);
  }
  return out;
}

struct LoadOneCase {
  int spines, leaves, hosts, nics;
  Collective coll;
  const char* hash;
};

class PlannerLoadOne : public ::testing::TestWithParam<LoadOneCase> {};

TEST_P(PlannerLoadOne, EveryStepHasLoadOneWhenTheFabricHashesThePlannedPorts) {
  const auto& c = GetParam();
  Fixture x = clos(c.spines, c.leaves, c.hosts, c.nics);
  auto s = build_schedule(c.coll, x.order.size(), 1000).value();
  auto table = make_model_path_table(x.f, make_hash(c.hash, 5).value());
  auto planned = plan_routes(x.f, x.order, s, *table, {});
  ASSERT_TRUE(planned) << planned.status().message();
  EXPECT_EQ(planned->stats.max_load, 1);
  EXPECT_EQ(planned->stats.steps_at_bound, static_cast<int>(s.steps.size()));
  auto loads = hashed_loads(x, s, planned->plan, c.hash, 5);
  EXPECT_EQ(loads, std::vector<int>(s.steps.size(), 1));
}

INSTANTIATE_TEST_SUITE_P(
    Fabrics, PlannerLoadOne,
    ::testing::Values(LoadOneCase{4, 4, 4, 1, Collective::kAllreduceHd, "crc32"},
                      LoadOneCase{5, 3, 5, 1, Collective::kAllreduceHd, "linux-l4"},
                      LoadOneCase{7, 5, 7, 1, Collective::kAllreduceHd, "crc32"},
                      LoadOneCase{8, 3, 4, 2, Collective::kAllreduceHd, "crc32"},
                      LoadOneCase{3, 7, 3, 1, Collective::kAllreduceRing, "linux-l4"},
                      LoadOneCase{13, 2, 13, 1, Collective::kAllreduceHd, "crc32"}));

TEST(Planner, SourcePortsAreUniquePerSourceHostAndInsideTheRange) {
  Fixture x = clos(4, 3, 4, 2);
  auto s = build_schedule(Collective::kAllreduceHd, x.order.size(), 1000).value();
  auto table = make_model_path_table(x.f, make_hash("crc32", 1).value());
  PlannerOptions opt;
  opt.sports = make_port_range(50000, 50999).value();
  auto planned = plan_routes(x.f, x.order, s, *table, opt);
  ASSERT_TRUE(planned) << planned.status().message();
  std::set<std::pair<std::string, uint16_t>> used;
  for (const auto& fl : planned->plan.flows) {
    EXPECT_TRUE(opt.sports.contains(fl.sport)) << fl.sport;
    EXPECT_TRUE(used.emplace(fl.src_host, fl.sport).second) << fl.src_host << " uses " << fl.sport << " twice";
    EXPECT_EQ(fl.dport, kRoceV2Port);
    EXPECT_EQ(fl.protocol, "udp");
  }
  // HD on 24 ranks: fold 8 + 4 levels x 16 pairs x 2 directions... every
  // directed pair once, rs and ag at one distance share it.
  std::set<std::pair<int, int>> pairs;
  for (const auto& st : s.steps) {
    for (const auto& fl : st.flows) pairs.emplace(fl.src, fl.dst);
  }
  EXPECT_EQ(planned->plan.flows.size(), pairs.size());
}

TEST(Planner, TcpRanksListenOnDportPlusTheirIndexOnTheHost) {
  Fixture x = clos(4, 2, 2, 3);  // 3 NICs (ranks) per host
  auto s = build_schedule(Collective::kAllreduceRing, x.order.size(), 1000).value();
  auto table = make_model_path_table(x.f, make_hash("crc32", 1).value());
  PlannerOptions opt;
  opt.protocol = "tcp";
  opt.tcp_dport = 29500;
  auto planned = plan_routes(x.f, x.order, s, *table, opt);
  ASSERT_TRUE(planned) << planned.status().message();
  auto dports = listen_ports(x.f, x.order, opt).value();
  std::map<std::string, int> seen_on_host;
  for (int r = 0; r < x.order.size(); ++r) {
    const auto& host = x.f.hosts[static_cast<size_t>(x.f.nics[static_cast<size_t>(x.order.nics[static_cast<size_t>(r)])].host)].name;
    EXPECT_EQ(dports[static_cast<size_t>(r)], 29500 + seen_on_host[host]++) << "rank " << r;
  }
  for (const auto& fl : planned->plan.flows) {
    EXPECT_EQ(fl.protocol, "tcp");
    EXPECT_EQ(fl.dport, dports[static_cast<size_t>(fl.dst_rank)]);
  }
  auto back = parse_plan(plan_to_json(planned->plan));
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(*back, planned->plan);
}

TEST(Planner, LinuxL3HashLeavesNoChoiceAndTheLoadIsReportedBesideTheBound) {
  Fixture x = clos(4, 4, 4);
  auto s = build_schedule(Collective::kAllreduceHd, x.order.size(), 1000).value();
  auto table = make_model_path_table(x.f, make_hash("linux-l3", 3).value());
  auto planned = plan_routes(x.f, x.order, s, *table, {});
  ASSERT_TRUE(planned) << planned.status().message();
  EXPECT_GE(planned->stats.max_load, planned->stats.max_lower_bound);
  EXPECT_EQ(hashed_loads(x, s, planned->plan, "linux-l3", 3).size(), s.steps.size());
  for (size_t i = 0; i < s.steps.size(); ++i) {
    EXPECT_EQ(planned->plan.steps[i].lower_bound, step_lower_bound(x.f, x.order, s.steps[i]));
  }
}

TEST(Planner, ThreeTierPlansAreValidAndNeverBelowTheBound) {
  auto f = topo::build_clos3({.pods = 3, .leaves_per_pod = 2, .aggs_per_pod = 2, .cores = 2, .hosts_per_leaf = 3}).value();
  Fixture x{f, ranking::rank(f, ranking::allocation_all(f), ranking::RankAlgo::kClos).value()};
  auto s = build_schedule(Collective::kAllreduceHd, x.order.size(), 1000).value();
  auto table = make_model_path_table(x.f, make_hash("crc32", 9).value());
  auto planned = plan_routes(x.f, x.order, s, *table, {});
  ASSERT_TRUE(planned) << planned.status().message();
  auto loads = hashed_loads(x, s, planned->plan, "crc32", 9);
  ASSERT_EQ(loads.size(), s.steps.size());
  for (size_t i = 0; i < s.steps.size(); ++i) {
    EXPECT_EQ(loads[i], planned->plan.steps[i].max_load) << "the plan's paths are where its ports hash";
    EXPECT_GE(planned->plan.steps[i].max_load, planned->plan.steps[i].lower_bound);
  }
}

struct BadOptions {
  PlannerOptions opt;
  const char* error;
};

// Designated initialisers of PlannerOptions trip GCC 12's
// -Wmissing-field-initializers; build the cases by hand.
PlannerOptions opts(std::string protocol, int ports_per_pair, PortRange sports, uint16_t dport) {
  PlannerOptions o;
  o.protocol = std::move(protocol);
  o.ports_per_pair = ports_per_pair;
  o.sports = sports;
  o.tcp_dport = dport;
  return o;
}

class PlannerErrors : public ::testing::TestWithParam<BadOptions> {};

TEST_P(PlannerErrors, SayWhatIsWrongInOneLine) {
  Fixture x = clos(4, 2, 4);
  auto s = build_schedule(Collective::kAllreduceHd, x.order.size(), 1000).value();
  auto table = make_model_path_table(x.f, make_hash("crc32", 1).value());
  auto planned = plan_routes(x.f, x.order, s, *table, GetParam().opt);
  ASSERT_FALSE(planned);
  EXPECT_EQ(planned.status().message(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PlannerErrors,
    ::testing::Values(
        BadOptions{opts("sctp", 64, {}, 29500), "unknown protocol 'sctp' (udp, tcp)"},
        BadOptions{opts("udp", 0, {}, 29500), "ports per pair must be >= 1 (got 0)"},
        BadOptions{opts("udp", 64, {1024, 4000}, 29500),
                   "source port range 1024-4000 reaches below 49152: a RoCE v2 (udp) source port is derived from "
                   "the QP's flow label and is always in 49152-65535"},
        BadOptions{opts("udp", 64, {49151, 65535}, 29500),
                   "source port range 49151-65535 reaches below 49152: a RoCE v2 (udp) source port is derived from "
                   "the QP's flow label and is always in 49152-65535"},
        BadOptions{opts("tcp", 64, {29000, 30000}, 29500),
                   "listen port 29500 lies inside the source port range 29000-30000"},
        BadOptions{opts("udp", 64, {49152, 49153}, 29500),
                   "no free source port for rank 0 (h1-1:eth0) -> rank 4 (h2-1:eth0): host 'h1-1' sends 3 flows, "
                   "each on a source port of its own, and every port model crc32 holds for this pair on a usable "
                   "route is taken (ports per route: s4 1, s1 1); the source port range 49152-49153 holds 2 ports: "
                   "widen it by at least 1 (--sport-range)"}));

}  // namespace
}  // namespace weft::routing
