// E-ECMP (ecmp.h crc32-qp): switches that also hash the RoCEv2 destination
// QP. The model's values, the path table's (sport, dqpn) choices, the QPN
// pool, the plan file's "dqpn", and the planner judged by the link-load
// checker over paths looked up again (with the planned QPNs) in a fresh table.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include <fmt/format.h>

#include "weft/routing/link_load.h"
#include "weft/routing/plan.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/routing/qpn_pool.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

// Expected values from an independent CRC-32 (Python's zlib.crc32) over src
// IP, dst IP, proto, dport, the switch seed (seed ^ sw * 0x9E3779B1), sport
// and the 24-bit QPN, big endian, rotated left by switch seed % 31 + 1. The
// same recipe without the QPN reproduces crc32's pinned 2855426940
// (path_table_test.cc).
TEST(EcmpQp, HashIsTheCrc32ContinuedOverTheDestinationQp) {
  auto h = make_hash("crc32-qp", 1).value();
  EXPECT_EQ(h->name(), "crc32-qp");
  EXPECT_TRUE(h->hashes_qpn());
  FiveTuple t{0x0a000001, 0x0a000102, kProtoUdp, 49152, kRoceV2Port, 0};
  EXPECT_EQ(h->hash(t, 3), 2667218046u);
  t.dqpn = 0x100;
  EXPECT_EQ(h->hash(t, 3), 3636217902u);
  t.dqpn = 0x101;
  EXPECT_EQ(h->hash(t, 3), 1165853707u);
  t.dqpn = kMaxQpn;
  EXPECT_EQ(h->hash(t, 3), 517279226u);
  auto h7 = make_hash("crc32-qp", 7).value();
  EXPECT_EQ(h7->hash({0x0a000001, 0x0a000002, kProtoUdp, 50000, kRoceV2Port, 0xABCDEF}, 3), 0x4fbb0510u);
}

class OldModels : public ::testing::TestWithParam<const char*> {};

TEST_P(OldModels, IgnoreTheQpn) {
  auto h = make_hash(GetParam(), 12345).value();
  EXPECT_FALSE(h->hashes_qpn());
  const FiveTuple t{0x0a000001, 0x0a000102, kProtoUdp, 49152, kRoceV2Port, 0};
  for (uint32_t q : {2u, 0x100u, 0x101u, 0xABCDEFu, kMaxQpn}) {
    FiveTuple u = t;
    u.dqpn = q;
    EXPECT_EQ(h->hash(u, 3), h->hash(t, 3)) << GetParam() << " QPN " << q;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, OldModels, ::testing::Values("crc32", "linux-l4", "linux-l3"));

// One 5-tuple, 8 next hops, only the QPN varies. 64 random QPNs reach every
// next hop; 64 consecutive ones only 4: a CRC is affine over GF(2), so QPNs
// differing in their low 6 bits move the hash within a small subspace (why
// the path table pairs QPNs with randomly drawn ports). crc32 sees one.
TEST(EcmpQp, TheQpnAloneMovesAFlowWhereOtherModelsDoNot) {
  std::mt19937 rng(5);
  std::vector<uint32_t> random_qpns(64);
  for (auto& q : random_qpns) q = std::uniform_int_distribution<uint32_t>(kMinDataQpn, kMaxQpn)(rng);
  for (const char* model : {"crc32-qp", "crc32"}) {
    auto h = make_hash(model, 7).value();
    std::set<size_t> consecutive, random;
    for (uint32_t q = 0x100; q < 0x140; ++q) {
      consecutive.insert(h->pick({0x0a000001, 0x0a000002, kProtoUdp, 50000, kRoceV2Port, q}, 0, 8));
    }
    for (uint32_t q : random_qpns) random.insert(h->pick({0x0a000001, 0x0a000002, kProtoUdp, 50000, kRoceV2Port, q}, 0, 8));
    EXPECT_EQ(random.size(), h->hashes_qpn() ? 8u : 1u) << model;
    EXPECT_EQ(consecutive.size(), h->hashes_qpn() ? 4u : 1u) << model;
  }
}

TEST(EcmpQp, PickSportsWithQpnsEqualsPickPerTuple) {
  auto h = make_hash("crc32-qp", 5).value();
  const FiveTuple t{0x0a000001, 0x0a000002, kProtoUdp, 0, kRoceV2Port, 0};
  const std::vector<uint16_t> sports{49152, 49153, 50000, 65535, 61000};
  const std::vector<uint32_t> qpns{0x100, 0x100, 0x2345, 2, kMaxQpn};
  std::vector<uint16_t> picks(sports.size());
  h->pick_sports(t, 4, 7, sports, picks, qpns);
  for (size_t i = 0; i < sports.size(); ++i) {
    FiveTuple u = t;
    u.sport = sports[i], u.dqpn = qpns[i];
    EXPECT_EQ(picks[i], h->pick(u, 4, 7)) << i;
  }
}

// ports() pairs the drawn sports with the query's QPNs; route() with a
// port's (sport, dqpn) gives the route ports() said.
TEST(EcmpQpTable, OffersSportQpnChoicesThatRouteAgrees) {
  auto f = topo::build_clos2({.spines = 6, .leaves = 3, .hosts_per_leaf = 4}).value();
  const std::vector<uint32_t> qpns{0x300, 0x301, 0x302, 0x377, 0x9999};
  for (const char* model : {"crc32-qp", "crc32"}) {
    auto table = make_model_path_table(f, make_hash(model, 3).value(), 11);
    EXPECT_EQ(table->hashes_qpn(), std::string_view(model) == "crc32-qp");
    PairRoutes pr;
    ASSERT_TRUE(table->ports({0, 9, kProtoUdp, kRoceV2Port, qpns}, PortRange{}, 64, pr));
    ASSERT_EQ(pr.ports.size(), 64u);
    std::map<uint32_t, int> used;
    for (const PortRoute& p : pr.ports) {
      const uint32_t dqpn = table->hashes_qpn() ? qpns.at(p.qpn) : 0;
      ++used[dqpn];
      EXPECT_TRUE(table->hashes_qpn() || p.qpn == 0);
      auto r = table->route({0, 9, kProtoUdp, p.sport, kRoceV2Port, dqpn});
      ASSERT_TRUE(r);
      const auto want = pr.route(static_cast<size_t>(p.route));
      EXPECT_EQ(*r, Route(want.begin(), want.end())) << model << " sport " << p.sport << " dqpn " << dqpn;
    }
    if (table->hashes_qpn()) {
      ASSERT_EQ(used.size(), qpns.size()) << "every QPN offered";
      for (uint32_t q : qpns) EXPECT_GE(used[q], 12) << "64 choices dealt over 5 QPNs";
    } else {
      EXPECT_EQ(used, (std::map<uint32_t, int>{{0u, 64}})) << "no QPN where the fabric does not hash it";
    }
  }
}

TEST(QpnPool, DefaultIsConsecutiveFromTheBase) {
  auto p = default_qpn_pool(3, 2);
  EXPECT_EQ(p, (QpnPool{{0x100, 0x101}, {0x102, 0x103}, {0x104, 0x105}}));
  EXPECT_EQ(default_qpn_pool(2)[1].front(), kDefaultQpnBase + static_cast<uint32_t>(kDefaultQpnsPerRank));
  auto parsed = parse_qpn_pool(R"({"qpns": [[2, 16777215], [77]]})", 2);
  ASSERT_TRUE(parsed) << parsed.status().message();
  EXPECT_EQ(*parsed, (QpnPool{{2, 16777215}, {77}}));
}

struct BadPool {
  const char* name;
  const char* text;
  const char* error;
};
class QpnPoolBad : public ::testing::TestWithParam<BadPool> {};

TEST_P(QpnPoolBad, IsOneMessageNamingThePath) {
  auto p = parse_qpn_pool(GetParam().text, 2);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.status().message(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, QpnPoolBad,
    ::testing::Values(
        BadPool{"not_object", "[1]", "QPN pool /qpns: missing or not an array (one list of QPNs per rank)"},
        BadPool{"too_few", R"({"qpns": [[5]]})", "QPN pool /qpns: 1 lists for 2 ranks (one per rank)"},
        BadPool{"empty", R"({"qpns": [[5], []]})", "QPN pool /qpns/1: not a non-empty array of QPNs"},
        BadPool{"gsi", R"({"qpns": [[5], [1]]})", "QPN pool /qpns/1/0: 1 is not a data QP number (2..16777215)"},
        BadPool{"wide", R"({"qpns": [[16777216], [3]]})",
                "QPN pool /qpns/0/0: 16777216 is not a data QP number (2..16777215)"},
        BadPool{"text", R"({"qpns": [["7"], [3]]})", "QPN pool /qpns/0/0: \"7\" is not a data QP number (2..16777215)"},
        BadPool{"twice", R"({"qpns": [[5, 6, 5], [3]]})", "QPN pool /qpns/0/2: QPN 5 is listed twice for rank 0"}),
    [](const auto& i) { return std::string(i.param.name); });

TEST(PlanFileDqpn, RoundTripsAndIsRefusedOverTcpOrOutside24Bits) {
  const std::string flow =
      R"({"version": 1, "collective": "allreduce-hd", "ranks": 2, "flows": [{"src_rank": 0, "dst_rank": 1,
          "src_host": "a", "dst_host": "b", "protocol": "%P", "sport": 50000, "dport": %D, "path": ["l1"]%Q}]})";
  auto make = [&](const std::string& proto, const std::string& q) {
    std::string s = flow;
    s.replace(s.find("%P"), 2, proto);
    s.replace(s.find("%D"), 2, proto == "udp" ? "4791" : "29500");
    s.replace(s.find("%Q"), 2, q);
    return s;
  };
  auto p = parse_plan(make("udp", R"(, "dqpn": 16777215)"));
  ASSERT_TRUE(p) << p.status().message();
  EXPECT_EQ(p->flows[0].dqpn, kMaxQpn);
  EXPECT_EQ(parse_plan(plan_to_json(*p)).value(), *p);
  EXPECT_EQ(parse_plan(make("udp", "")).value().flows[0].dqpn, 0u) << "absent: 0";
  EXPECT_EQ(parse_plan(make("tcp", R"(, "dqpn": 300)")).status().message(),
            "route plan /flows/0/dqpn: a destination QP on a tcp flow (QPs are RoCE's: udp flows only)");
  EXPECT_EQ(parse_plan(make("udp", R"(, "dqpn": 16777216)")).status().message(),
            "route plan /flows/0/dqpn: 16777216 is not a data QP number (2..16777215)");
  EXPECT_EQ(parse_plan(make("udp", R"(, "dqpn": 1)")).status().message(),
            "route plan /flows/0/dqpn: 1 is not a data QP number (2..16777215)");
}

ranking::RankOrder shuffled(const topo::Fabric& f, std::mt19937& rng) {
  auto alloc = ranking::allocation_all(f);
  std::shuffle(alloc.begin(), alloc.end(), rng);
  return ranking::rank(f, alloc, ranking::RankAlgo::kClos).value();
}

// Steps of `plan` whose load, with the paths its flows' (sport, dqpn) take in
// a fresh `model` table, is above the checker's bound.
int steps_above_bound(const topo::Fabric& f, const ranking::RankOrder& order, Schedule s, const RoutePlan& plan,
                      const char* model, uint32_t seed) {
  auto fresh = make_model_path_table(f, make_hash(model, seed).value(), seed);
  auto router = make_table_router(f, order, plan, *fresh);
  EXPECT_TRUE(router) << router.status().message();
  if (!router) return -1;
  EXPECT_TRUE(apply_plan_rounds(plan, s));
  auto rep = check_link_load(f, order, s, **router);
  EXPECT_TRUE(rep) << rep.status().message();
  if (!rep) return -1;
  int above = 0;
  for (const auto& sl : rep->steps) above += sl.max_load > sl.lower_bound;
  return above;
}

// HD and ring on random 2-tier shapes (non-blocking and oversubscribed): a
// crc32-qp plan is at the checker's bound in every step, every flow has a
// QPN of its destination's pool and no QPN serves two flows. The same
// shapes planned with plain crc32 (blind to QPNs) and run on the E-ECMP
// fabric, each flow on a QPN of its destination's, leave steps above it.
TEST(EcmpQpPlanner, HdAndRingPlansReachTheBoundAndQpnBlindPlansDoNot) {
  std::mt19937 rng(2024u);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int blind_cases_above = 0, cases = 0;
  for (int c = 0; c < 40; ++c) {
    const int hosts = uni(2, 8), leaves = uni(2, 6);
    const int spines = c % 4 == 3 ? uni(1, hosts) : hosts + uni(0, 2);
    auto f = topo::build_clos2({.spines = spines, .leaves = leaves, .hosts_per_leaf = hosts}).value();
    auto order = shuffled(f, rng);
    if (order.size() < 2) continue;
    const Collective coll = c % 2 ? Collective::kAllreduceRing : Collective::kAllreduceHd;
    auto s = build_schedule(coll, order.size(), 4096).value();
    const auto seed = static_cast<uint32_t>(c + 1);
    const std::string what = fmt::format("case {}: S={} L={} H={} {}", c, spines, leaves, hosts,
                                         coll == Collective::kAllreduceHd ? "hd" : "ring");
    auto table = make_model_path_table(f, make_hash("crc32-qp", seed).value(), seed);
    auto planned = plan_routes(f, order, s, *table, {});
    ASSERT_TRUE(planned) << what << ": " << planned.status().message();
    EXPECT_EQ(steps_above_bound(f, order, s, planned->plan, "crc32-qp", seed), 0) << what;
    const QpnPool pool = default_qpn_pool(order.size());  // the planner's, for these (<= 8 flows into a rank)
    std::set<std::pair<int, uint32_t>> held;
    for (const PlanFlow& fl : planned->plan.flows) {
      if (fl.path.size() == 1 && fl.src_host == fl.dst_host) continue;
      const auto& mine = pool[static_cast<size_t>(fl.dst_rank)];
      EXPECT_NE(std::find(mine.begin(), mine.end(), fl.dqpn), mine.end()) << what << ": dqpn " << fl.dqpn;
      EXPECT_TRUE(held.emplace(fl.dst_rank, fl.dqpn).second) << what << ": QPN " << fl.dqpn << " serves two flows";
    }
    // Plain crc32's plan; on the E-ECMP fabric the k-th flow into a rank
    // rides that rank's k-th QPN.
    auto blind_table = make_model_path_table(f, make_hash("crc32", seed).value(), seed);
    auto blind = plan_routes(f, order, s, *blind_table, {});
    ASSERT_TRUE(blind) << what;
    std::map<int, int> into;
    for (PlanFlow& fl : blind->plan.flows) {
      EXPECT_EQ(fl.dqpn, 0u) << "crc32 plans carry no dqpn";
      fl.dqpn = pool[static_cast<size_t>(fl.dst_rank)][static_cast<size_t>(into[fl.dst_rank]++)];
    }
    EXPECT_EQ(steps_above_bound(f, order, s, blind->plan, "crc32", seed), 0) << what << ": on its own fabric";
    ++cases;
    blind_cases_above += steps_above_bound(f, order, s, blind->plan, "crc32-qp", seed) > 0;
  }
  std::printf("QPN-blind plans above the bound on an E-ECMP fabric: %d of %d cases\n", blind_cases_above, cases);
  EXPECT_GE(blind_cases_above * 4, cases) << "ignoring the QPN breaks many plans (18 of 40 when written)";
}

TEST(EcmpQpPlanner, RefusesPoolsThatCannotApply) {
  auto f = topo::build_clos2({.spines = 4, .leaves = 2, .hosts_per_leaf = 4}).value();
  auto order = ranking::rank(f, ranking::allocation_all(f), ranking::RankAlgo::kClos).value();
  auto s = build_schedule(Collective::kAllreduceHd, order.size(), 4096).value();
  auto crc = make_model_path_table(f, make_hash("crc32", 1).value());
  auto qp = make_model_path_table(f, make_hash("crc32-qp", 1).value());
  PlannerOptions with_pool;
  with_pool.qpns = default_qpn_pool(order.size());
  EXPECT_EQ(plan_routes(f, order, s, *crc, with_pool).status().message(),
            "a QPN pool needs a fabric whose switches hash the destination QP (--hash crc32-qp); model crc32 does "
            "not, so QPNs cannot change a path");
  PlannerOptions tcp;
  tcp.protocol = "tcp";
  EXPECT_EQ(plan_routes(f, order, s, *qp, tcp).status().message(),
            "model crc32-qp hashes the RoCEv2 destination QP, but protocol tcp has none: plan udp (RoCEv2) flows, "
            "or use a model without QPNs");
  PlannerOptions short_pool;
  short_pool.qpns = default_qpn_pool(3);
  EXPECT_EQ(plan_routes(f, order, s, *qp, short_pool).status().message(), "the QPN pool lists 3 ranks, the job has 8");
  // One QPN per rank, but HD sends three flows into every rank: each QPN
  // serves one flow, so the second flow into a rank finds none.
  PlannerOptions one;
  one.qpns = default_qpn_pool(order.size(), 1);
  auto starved = plan_routes(f, order, s, *qp, one);
  ASSERT_FALSE(starved);
  EXPECT_NE(starved.status().message().find("QPN serves another flow into it (an RC QP connects to one remote QP), "
                                           "and 3 flows come into it: publish at least 3 QPNs per rank (--qpn-pool)"),
            std::string::npos)
      << starved.status().message();
}

}  // namespace
}  // namespace weft::routing
