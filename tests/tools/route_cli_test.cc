// weft route and weft check --plan as a user meets them: a plan with load 1
// on a non-blocking Clos, and bad input answered by one line on stderr, a
// non-zero exit and no output file.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "cli_fixture.h"
#include "weft/routing/plan.h"

namespace {

class RouteCli : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    ASSERT_EQ(weft("topo gen clos --spines 4 --leaves 3 --hosts 4 -o " + path("f.json")).rc, 0);
    ASSERT_EQ(weft("rank --topology " + path("f.json") + " --all --algo clos -o " + path("r.csv")).rc, 0);
  }
  std::string base() const { return "route --topology " + path("f.json") + " --ranks " + path("r.csv") + " "; }
};

// Out of model ports, the advice is the one that works: ask the model for
// as many as the flows need (a probe database would need re-probing).
TEST_F(Cli, OutOfModelPortsTheAdviceIsPortsPerPairAndItWorks) {
  ASSERT_EQ(weft("topo gen clos --spines 4 --leaves 4 --hosts 4 -o " + path("f.json")).rc, 0);
  ASSERT_EQ(weft("rank --topology " + path("f.json") + " --all --format csv -o " + path("r.csv")).rc, 0);
  const std::string route = "route --topology " + path("f.json") + " --ranks " + path("r.csv") +
                            " --protocol tcp --qps-per-connection 64 -o " + path("p.json");
  CliRun r = weft(route);
  EXPECT_EQ(r.rc, 1);
  const std::string advice = "64 ports per pair were asked of the model: ask for more (--ports-per-pair ";
  const auto at = r.err.find(advice);
  ASSERT_NE(at, std::string::npos) << r.err;
  const std::string n = r.err.substr(at + advice.size(), r.err.find(')', at) - at - advice.size());
  CliRun again = weft(route + " --ports-per-pair " + n);
  EXPECT_EQ(again.rc, 0) << again.err;
}

TEST_F(RouteCli, WritesAPlanThatTheCheckerReplaysAtLoadOne) {
  CliRun r = weft(base() + "--protocol tcp --dport 29500 -o " + path("plan.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("max load 1 (lower bound 1), 8 of 8 steps at the bound; wrote"), std::string::npos) << r.err;
  auto j = nlohmann::json::parse(weft::read_file(path("plan.json")).value());
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["collective"], "allreduce-hd");
  EXPECT_EQ(j["ranks"], 12);
  for (const auto& fl : j["flows"]) {
    EXPECT_EQ(fl["protocol"], "tcp");
    EXPECT_EQ(fl["dport"], 29500) << "one rank per host listens on --dport";
    EXPECT_GE(fl["sport"].get<int>(), 49152);
  }
  CliRun c = weft("check --topology " + path("f.json") + " --ranks " + path("r.csv") + " --routes plan --plan " +
                  path("plan.json") + " --json");
  ASSERT_EQ(c.rc, 0) << c.err;
  EXPECT_EQ(nlohmann::json::parse(c.out)["max_load"], 1);
}

// --qps-per-connection 4: every directed pair of the Q = 1 plan has
// connections 0..3, each a flow on a source port no other flow of its host
// uses; the checker replays it at the bound.
TEST_F(RouteCli, QpsPerConnectionGivesEveryPairQConnectionsOnPortsOfTheirOwn) {
  ASSERT_EQ(weft(base() + "--protocol tcp -o " + path("one.json")).rc, 0);
  CliRun r = weft(base() + "--protocol tcp --qps-per-connection 4 -o " + path("four.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("8 of 8 steps at the bound; wrote"), std::string::npos) << r.err;
  auto one = weft::routing::load_plan(path("one.json"));
  auto four = weft::routing::load_plan(path("four.json"));
  ASSERT_TRUE(one && four);
  ASSERT_EQ(four->flows.size(), 4 * one->flows.size());
  std::set<std::pair<std::string, int>> host_ports;
  for (const auto& f : one->flows) {
    std::set<int> conns;
    for (const auto& g : four->flows) {
      if (g.src_rank != f.src_rank || g.dst_rank != f.dst_rank) continue;
      conns.insert(g.conn);
      EXPECT_EQ(g.qp, 0);
      EXPECT_EQ(g.dport, f.dport);
      EXPECT_TRUE(host_ports.emplace(g.src_host, g.sport).second) << g.src_host << " reuses " << g.sport;
    }
    EXPECT_EQ(conns, (std::set<int>{0, 1, 2, 3})) << f.src_rank << " -> " << f.dst_rank;
  }
  // weft check replays every connection (the plan's conn 0..3) at the plan's load.
  int planned = 0;
  for (const auto& st : four->steps) planned = std::max(planned, st.max_load);
  CliRun c = weft("check --topology " + path("f.json") + " --ranks " + path("r.csv") + " --routes plan --plan " +
                  path("four.json") + " --json");
  ASSERT_EQ(c.rc, 0) << c.err;
  EXPECT_EQ(nlohmann::json::parse(c.out)["max_load"], planned);
  EXPECT_EQ(planned, 4) << "each host's 4 connections on its access link";
}

// `weft demo --fail 2:3`'s fabric: 4 spines x 4 leaves x 4 hosts, s2 - l3
// down. HD at distances 4 and 8 sends l3's 4 hosts over 3 uplinks.
class RouteCliFailedLink : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    ASSERT_EQ(weft("topo gen clos --spines 4 --leaves 4 --hosts 4 -o " + path("f.json")).rc, 0);
    auto j = nlohmann::json::parse(weft::read_file(path("f.json")).value());
    int down = 0;
    for (auto& l : j["links"]) {
      if ((l["a"] == "s2" && l["b"] == "l3") || (l["a"] == "l3" && l["b"] == "s2")) l["state"] = "down", ++down;
    }
    ASSERT_EQ(down, 1);
    write("f.json", j.dump());
    ASSERT_EQ(weft("rank --topology " + path("f.json") + " --all --algo clos -o " + path("r.csv")).rc, 0);
  }
  std::string base() const { return "route --topology " + path("f.json") + " --ranks " + path("r.csv") + " "; }
  nlohmann::json check(const std::string& plan) {
    CliRun c = weft("check --topology " + path("f.json") + " --ranks " + path("r.csv") + " --routes plan --plan " +
                    path(plan) + " --json");
    EXPECT_EQ(c.rc, 0) << c.err;
    return nlohmann::json::parse(c.out);
  }
};

TEST_F(RouteCliFailedLink, SplitsTheFarStepsIntoTwoRoundsOfLoadOne) {
  CliRun r = weft(base() + "-o " + path("plan.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("max load 1 (lower bound 1), 8 of 8 steps at the bound; 4 steps in up to 2 rounds, load "
                       "counted per round (one round would need 2); wrote"),
            std::string::npos)
      << r.err;
  auto c = check("plan.json");
  EXPECT_EQ(c["max_load"], 1);
  EXPECT_EQ(c["max_rounds"], 2);
  for (const auto& st : c["steps"]) {
    EXPECT_EQ(st["rounds"], st["distance"].get<int>() >= 4 ? 2 : 1) << st;
    EXPECT_EQ(st["single_round_bound"], st["distance"].get<int>() >= 4 ? 2 : 1) << st;
  }
}

TEST_F(RouteCliFailedLink, NoRoundsLeavesLoadTwoAndWritesNoRounds) {
  CliRun r = weft(base() + "--no-rounds -o " + path("plan.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("max load 2 (lower bound 2), 8 of 8 steps at the bound; wrote"), std::string::npos) << r.err;
  EXPECT_EQ(weft::read_file(path("plan.json")).value().find("rounds"), std::string::npos);
  EXPECT_EQ(check("plan.json")["max_load"], 2);
}

// A host's own cable down: rank writes the order with a warning naming the
// NIC, and route and check (any routes) refuse it in one line naming the
// rank, the NIC and its leaf; a plan made before the cut no longer replays.
TEST_F(Cli, AHostLinkThatIsDownIsNamedByRankAndRefusedByRouteAndCheck) {
  ASSERT_EQ(weft("topo gen clos --spines 4 --leaves 4 --hosts 4 -o " + path("f.json")).rc, 0);
  ASSERT_EQ(weft("rank --topology " + path("f.json") + " --all --algo clos -o " + path("r.csv")).rc, 0);
  const std::string on = "--topology " + path("f.json") + " --ranks " + path("r.csv") + " ";
  ASSERT_EQ(weft("route " + on + "-o " + path("before.json")).rc, 0);
  auto j = nlohmann::json::parse(weft::read_file(path("f.json")).value());
  int down = 0;
  for (auto& l : j["links"]) {
    if (l["a"] == "h2-3:eth0" || l["b"] == "h2-3:eth0") l["state"] = "down", ++down;
  }
  ASSERT_EQ(down, 1);
  write("f.json", j.dump());
  CliRun rank = weft("rank --topology " + path("f.json") + " --all --algo clos -o " + path("r.csv"));
  EXPECT_EQ(rank.rc, 0) << rank.err;
  EXPECT_NE(rank.err.find("weft rank: warning: 1 allocated NIC(s) have their access link down: h2-3:eth0 (to 'l2'); "
                          "no route reaches them"),
            std::string::npos)
      << rank.err;
  const std::string why = "h2-3:eth0's link to 'l2' is down; no source port avoids it: bring the link up or leave "
                          "that NIC out of the job (weft rank --hosts)\n";
  CliRun route = weft("route " + on + "-o " + path("plan.json"));
  EXPECT_EQ(route.rc, 1);
  EXPECT_EQ(route.err, "weft: error: no path rank 6 (h2-3:eth0) -> rank 7 (h2-4:eth0): " + why);
  EXPECT_FALSE(fs::exists(path("plan.json")));
  for (const char* routes : {"ideal", "ecmp"}) {
    CliRun c = weft("check " + on + "--routes " + routes);
    EXPECT_EQ(c.rc, 1) << routes;
    EXPECT_EQ(c.err, "weft: error: step 0 (rs d=1): no path rank 6 (h2-3:eth0) -> rank 7 (h2-4:eth0): " + why) << routes;
  }
  CliRun replay = weft("check " + on + "--routes plan --plan " + path("before.json"));
  EXPECT_EQ(replay.rc, 1);
  EXPECT_NE(replay.err.find("h2-3:eth0's link to 'l2' is down"), std::string::npos) << replay.err;
}

// A ring whose every edge crosses leaves (hosts interleaved leaf by leaf)
// sends all four of l3's flows over its three uplinks: the plan splits both
// ring steps into 2 rounds of load 1, which the library holds per repetition
// (collectives/algorithms/ring_gates.cc). weft's own order (contiguous
// leaves) sends one flow off each leaf and needs none.
TEST_F(RouteCliFailedLink, AnInterleavedRingGoesInTwoRoundsOfLoadOne) {
  std::string csv = "rank,host,nic,switch\n";
  for (int k = 0; k < 16; ++k) {
    const int leaf = k % 4 + 1, host = k / 4 + 1;
    csv += "" + std::to_string(k) + ",h" + std::to_string(leaf) + "-" + std::to_string(host) + ",eth0,l" +
           std::to_string(leaf) + "\n";
  }
  write("interleaved.csv", csv);
  CliRun r = weft("route --topology " + path("f.json") + " --ranks " + path("interleaved.csv") +
                  " --collective allreduce-ring -o " + path("ring.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("max load 1 (lower bound 1), 2 of 2 steps at the bound; 2 steps in up to 2 rounds, load "
                       "counted per round (one round would need 2); wrote"),
            std::string::npos)
      << r.err;
  CliRun ours = weft(base() + "--collective allreduce-ring -o " + path("ours.json"));
  ASSERT_EQ(ours.rc, 0) << ours.err;
  EXPECT_NE(ours.err.find("max load 1 (lower bound 1), 2 of 2 steps at the bound; wrote"), std::string::npos)
      << ours.err;
}

struct BadRoute {
  const char* name;
  const char* args;   // after "route --topology T --ranks R"
  const char* error;  // the stderr line
};

class RouteCliBadInput : public RouteCli, public ::testing::WithParamInterface<BadRoute> {};

TEST_P(RouteCliBadInput, PrintsOneLineExitsNonZeroAndWritesNothing) {
  write("other.csv", "rank,host,nic,switch\n0,h1-1,eth0,l1\n1,h9-9,eth0,l1\n");
  std::string args = GetParam().args;
  if (auto at = args.find("$O"); at != std::string::npos) args.replace(at, 2, path("other.csv"));
  CliRun r = weft(base() + args + " -o " + path("out.json"));
  EXPECT_NE(r.rc, 0);
  std::string expected = std::string("weft: error: ") + GetParam().error + "\n";
  if (auto at = expected.find("$O"); at != std::string::npos) expected.replace(at, 2, path("other.csv"));
  EXPECT_EQ(r.err, expected);
  EXPECT_FALSE(fs::exists(path("out.json")));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RouteCliBadInput,
    ::testing::Values(
        BadRoute{"unknown_collective", "--collective allgather",
                 "unknown --collective 'allgather' (allreduce-hd, allreduce-ring, allreduce-hybrid, nccl-ring)"},
        BadRoute{"channels_without_nccl_ring", "--channels 2",
                 "--channels is for --collective nccl-ring only, not allreduce-hd"},
        BadRoute{"qps_without_nccl_ring", "--collective allreduce-ring --qps 2",
                 "--qps is for --collective nccl-ring only, not allreduce-ring"},
        BadRoute{"zero_channels", "--collective nccl-ring --channels 0",
                 "--channels 0 is out of range (1..64, NCCL's MAXCHANNELS)"},
        BadRoute{"too_many_qps", "--collective nccl-ring --qps 17",
                 "--qps 17 is out of range (1..16, the plugin's WEFT_NCCL_QPS)"},
        BadRoute{"nccl_ring_over_tcp", "--collective nccl-ring --protocol tcp",
                 "nccl-ring plans RoCE v2 QPs: protocol 'tcp' must be udp"},
        BadRoute{"nccl_ring_without_addresses", "--collective nccl-ring",
                 "nccl-ring: rank 0's NIC h1-1:eth0 has no address in the topology (nics[].address): the NCCL plugin "
                 "finds a QP's flow by its NICs' IPv4 addresses"},
        BadRoute{"empty_port_range", "--sport-range 60000-50000",
                 "--sport-range: port range 60000-50000 is empty (low end above high end)"},
        BadRoute{"bad_port_range", "--sport-range 49152", "--sport-range: bad port range '49152' (LO-HI, e.g. 49152-65535)"},
        BadRoute{"impossible_port_range", "--sport-range 49152-49153",
                 "no free source port for rank 1 (h1-2:eth0) -> rank 8 (h3-1:eth0): host 'h1-2' sends 4 flows, "
                 "each on a source port of its own, and every port model crc32 holds for this pair on a usable route "
                 "is taken (ports per route: s4 1, s1 1); the source port range 49152-49153 holds 2 ports: widen it "
                 "by at least 2 (--sport-range)"},
        BadRoute{"dport_with_udp", "--dport 1234", "--dport is for --protocol tcp: udp flows go to RoCE v2's port 4791"},
        BadRoute{"udp_ports_below_roce", "--sport-range 1024-4000",
                 "source port range 1024-4000 reaches below 49152: a RoCE v2 (udp) source port is derived from the "
                 "QP's flow label and is always in 49152-65535"},
        BadRoute{"listen_port_in_range", "--protocol tcp --dport 50000",
                 "listen port 50000 lies inside the source port range 49152-65535"},
        BadRoute{"unknown_hash", "--hash fnv", "unknown hash model 'fnv' (crc32, crc32-qp, linux-l4, linux-l3)"},
        BadRoute{"missing_probe_db", "--paths no-such-fabric.db",
                 "--paths no-such-fabric.db: opening no-such-fabric.db: unable to open database file"},
        BadRoute{"zero_qps_per_connection", "--protocol tcp --qps-per-connection 0",
                 "--qps-per-connection: 0 connections per directed pair: the TCP transport opens 1..64 "
                 "(connections_per_peer)"},
        BadRoute{"too_many_qps_per_connection", "--protocol tcp --qps-per-connection 65",
                 "--qps-per-connection: 65 connections per directed pair: the TCP transport opens 1..64 "
                 "(connections_per_peer)"},
        BadRoute{"qps_per_connection_over_udp", "--qps-per-connection 4",
                 "--qps-per-connection 4 needs --protocol tcp: it plans the TCP transport's connections_per_peer "
                 "connections"},
        BadRoute{"qps_per_connection_with_nccl_ring", "--collective nccl-ring --qps-per-connection 2",
                 "--qps-per-connection: nccl-ring plans the plugin's QPs with --qps"}),
    [](const auto& p) { return std::string(p.param.name); });

TEST_F(RouteCli, RanksNotInTheTopologyAreOneLine) {
  write("bad.csv", "rank,host,nic,switch\n0,h1-1,eth0,l1\n1,h9-9,eth0,l1\n");
  CliRun r = weft("route --topology " + path("f.json") + " --ranks " + path("bad.csv") + " -o " + path("out.json"));
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("h9-9"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("out.json")));
}

TEST_F(RouteCli, CorruptPlansAreRefusedOnRead) {
  ASSERT_EQ(weft(base() + "-o " + path("plan.json")).rc, 0);
  std::string text = weft::read_file(path("plan.json")).value();
  text.replace(text.find("\"sport\": "), 9, "\"sport\": 7");  // 7 + digits: out of 1..65535
  write("bad.json", text);
  CliRun r = weft("check --topology " + path("f.json") + " --ranks " + path("r.csv") + " --routes plan --plan " +
                  path("bad.json"));
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("route plan /flows/0/sport: "), std::string::npos) << r.err;
  write("trunc.json", text.substr(0, text.size() / 2));
  r = weft("check --topology " + path("f.json") + " --ranks " + path("r.csv") + " --routes plan --plan " +
           path("trunc.json"));
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("parse error"), std::string::npos) << r.err;
}

}  // namespace
