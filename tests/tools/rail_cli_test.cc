// Rail and multi-plane fabrics from the command line: gen, show (text, JSON,
// SVG), rank and check, and bad input refused without writing.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_fixture.h"

namespace {

TEST_F(Cli, GenRailShowsRailsAndPlanesAndRoundTripsItsJson) {
  ASSERT_EQ(weft("topo gen rail --hosts 3 --nics 2 --spines 2 --planes 2 -o " + path("f.json")).rc, 0);
  CliRun r = weft("topo show " + path("f.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("fabric   rail-3h-2r-1l-2s-2p (rail)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("planes   2  rails 2\n"
                       "  plane 0: 2 upper switches, 10 links\n"
                       "    rail 0: 1 leaves, 3 NICs\n"
                       "    rail 1: 1 leaves, 3 NICs\n"
                       "  plane 1: 2 upper switches, 10 links\n"),
            std::string::npos)
      << r.out;
  CliRun j = weft("topo show " + path("f.json") + " --json");
  ASSERT_EQ(j.rc, 0) << j.err;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["kind"], "rail");
  EXPECT_EQ(doc["hosts"][2]["nics"][3]["name"], "eth1p1");
  EXPECT_EQ(doc["hosts"][2]["nics"][3]["switch"], "pl2-r2-l1");
  EXPECT_EQ(doc["hosts"][2]["nics"][3]["rail"], 1);
  EXPECT_EQ(doc["hosts"][2]["nics"][3]["plane"], 1);
  write("again.json", j.out);
  CliRun again = weft("topo show " + path("again.json") + " --json");
  EXPECT_EQ(again.out, j.out) << "a loaded file round-trips unchanged";
}

TEST_F(Cli, ShowDrawsTheFabricWithRailAndPlaneInTheTooltips) {
  ASSERT_EQ(weft("topo gen clos --spines 2 --leaves 2 --hosts 2 --planes 2 -o " + path("f.json")).rc, 0);
  ASSERT_EQ(weft("topo show " + path("f.json") + " --svg " + path("f.svg")).rc, 0);
  const std::string svg = weft::read_file(path("f.svg")).value();
  EXPECT_NE(svg.find("<title>h2-2:eth0p1 plane 1</title>"), std::string::npos);
  EXPECT_NE(svg.find("fill=\"#2e8b57\"><title>pl2-s1 plane 1</title>"), std::string::npos);
  EXPECT_NE(svg.find("switches and NICs filled by plane"), std::string::npos);
  ASSERT_EQ(weft("topo gen rail --hosts 2 --nics 2 --spines 1 -o " + path("r.json")).rc, 0);
  ASSERT_EQ(weft("topo show " + path("r.json") + " --svg " + path("r.svg")).rc, 0);
  EXPECT_NE(weft::read_file(path("r.svg")).value().find("<title>r2-l1 rail 1</title>"), std::string::npos);
}

TEST_F(Cli, CheckOnADualPlaneFabricCarriesEveryFlowOnItsSourcePlane) {
  ASSERT_EQ(weft("topo gen rail --hosts 4 --nics 2 --spines 2 --planes 2 -o " + path("f.json")).rc, 0);
  CliRun rail = weft("rank --topology " + path("f.json") + " --all --algo rail --format torchrun -o " + path("r.txt"));
  ASSERT_EQ(rail.rc, 0) << rail.err;
  CliRun r = weft("check --topology " + path("f.json") + " --ranks " + path("r.txt"));
  EXPECT_EQ(r.rc, 0) << r.err;
  // d=2 pairs the two ports of one NIC: no link, no load.
  EXPECT_NE(r.out.find("step  x-rail x-plane  max load per rail        per plane\n"
                       "   0      16       0  2 2                      2 2\n"
                       "   1       0       0  0 0                      0 0\n"),
            std::string::npos)
      << r.out;
}

TEST_F(Cli, CheckNamesAFlowWhoseDestinationNicHasNoPortOnTheSourcePlane) {
  // Host h1-2 loses NIC 1's plane-1 port: a flow from plane 1 to that NIC has nowhere to arrive.
  ASSERT_EQ(weft("topo gen clos --spines 2 --leaves 2 --hosts 2 --nics 2 --planes 2 -o " + path("f.json")).rc, 0);
  auto doc = nlohmann::json::parse(weft::read_file(path("f.json")).value());
  auto& nics = doc["hosts"][1]["nics"];
  nics.erase(3);
  ASSERT_EQ(nics.size(), 3u);
  auto& links = doc["links"];
  for (size_t i = 0; i < links.size(); ++i) {
    if (links[i]["a"] == "h1-2:eth1p1" || links[i]["b"] == "h1-2:eth1p1") links.erase(i--);
  }
  std::ofstream(path("g.json")) << doc.dump();
  ASSERT_EQ(weft("rank --topology " + path("g.json") + " --all --algo rail --format csv -o " + path("r.csv")).rc, 0);
  CliRun r = weft("check --topology " + path("g.json") + " --ranks " + path("r.csv"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err,
            "weft: error: 2 flows cross planes, which share no switch, so they have no route (first: step 1 (rs d=1): "
            "rank 14 on h1-2:eth0p1 (plane 1) -> rank 13 on h1-2:eth1p0 (plane 0, whose host has no such NIC on "
            "plane 1)); a flow rides its source port's plane to the destination NIC's port on it, so give every NIC "
            "a port on every plane\n");
  CliRun route = weft("route --topology " + path("g.json") + " --ranks " + path("r.csv") + " -o " + path("p.json"));
  EXPECT_EQ(route.rc, 1);
  EXPECT_EQ(route.err,
            "weft: error: no path rank 14 (h1-2:eth0p1, plane 1) -> rank 13 (h1-2:eth1p0, plane 0): host 'h1-2' has "
            "no port of that NIC on plane 1 (ports bound to the same GPUs, matched by position), and planes share "
            "no switch\n");
  EXPECT_FALSE(fs::exists(path("p.json")));
}

TEST_F(Cli, RouteHybridOnADualPlaneRailFabricPlansEachLocalRankOnItsOwnRailAndPlane) {
  ASSERT_EQ(weft("topo gen rail --hosts 4 --nics 2 --rail-leaves 2 --spines 2 --planes 2 -o " + path("f.json")).rc, 0);
  CliRun rank = weft("rank --topology " + path("f.json") + " --all --collective allreduce-hybrid -o " + path("r.csv"));
  ASSERT_EQ(rank.rc, 0) << rank.err;
  EXPECT_NE(rank.err.find("auto ranks this allocation with rail: its link-load bound for allreduce-hybrid is no "
                          "higher than clos's"),
            std::string::npos)
      << rank.err;
  CliRun r = weft("route --topology " + path("f.json") + " --ranks " + path("r.csv") +
                  " --collective allreduce-hybrid -o " + path("p.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("max load 1 (lower bound 1), 4 of 4 steps at the bound"), std::string::npos) << r.err;
  const auto plan = nlohmann::json::parse(weft::read_file(path("p.json")).value());
  EXPECT_EQ(plan["collective"], "allreduce-hybrid");
  // HD over 4 hosts (rs d=1,2, ag d=2,1), one flow per local rank: 4 local x 4 hosts x 2 partners.
  EXPECT_EQ(plan["steps"].size(), 4u);
  ASSERT_EQ(plan["flows"].size(), 32u);
  for (const auto& fl : plan["flows"]) {
    EXPECT_NE(fl["src_host"], fl["dst_host"]);
    EXPECT_EQ(fl["src_rank"].get<int>() % 4, fl["dst_rank"].get<int>() % 4);
    EXPECT_EQ(fl["src_nic"], fl["dst_nic"]);  // the same rail and plane
  }
  CliRun c = weft("check --topology " + path("f.json") + " --ranks " + path("r.csv") +
                  " --collective allreduce-hybrid --routes plan --plan " + path("p.json"));
  EXPECT_EQ(c.rc, 0) << c.err;
  EXPECT_NE(c.out.find("max load 1 (lower bound 1) over 4 steps"), std::string::npos) << c.out;
}

// HD on a rail order runs its fold and distance-1 steps between the two NICs
// of a host, over a spine; auto ranks for the collective and says why.
TEST_F(Cli, RankAutoTakesLeafSetsForHdOnARailFabricAndSaysWhy) {
  ASSERT_EQ(weft("topo gen rail --hosts 7 --nics 2 --spines 2 --planes 2 -o " + path("f.json")).rc, 0);
  CliRun rank = weft("rank --topology " + path("f.json") + " --all -o " + path("auto.csv"));
  ASSERT_EQ(rank.rc, 0) << rank.err;
  EXPECT_EQ(rank.err,
            "weft rank: auto ranks this allocation with clos: its link-load bound for allreduce-hd is lower (the "
            "busiest link of each step, summed over the steps, carries 5.75 vectors with clos, 8.25 with rail; "
            "largest step bound 2 vs 3)\nwrote " +
                path("auto.csv") + " (28 ranks, auto (clos) order, csv format)\n");
  ASSERT_EQ(weft("rank --topology " + path("f.json") + " --all --algo rail -o " + path("rail.csv")).rc, 0);
  CliRun a = weft("check --topology " + path("f.json") + " --ranks " + path("auto.csv"));
  CliRun r = weft("check --topology " + path("f.json") + " --ranks " + path("rail.csv"));
  ASSERT_EQ(a.rc, 0) << a.err;
  ASSERT_EQ(r.rc, 0) << r.err;
  // The fold: the whole vector between the two NICs of a host, over a spine, on the rail order.
  EXPECT_NE(a.out.find("   0  fold        1     12       2  64.0 MiB         1      1"), std::string::npos) << a.out;
  EXPECT_NE(r.out.find("   0  fold        1     12      12 192.0 MiB         3      3"), std::string::npos) << r.out;
  EXPECT_NE(a.out.find("max load 2 (lower bound 2) over 10 steps"), std::string::npos) << a.out;
  EXPECT_NE(r.out.find("max load 3 (lower bound 3) over 10 steps"), std::string::npos) << r.out;
}

// torchrun needs a host's ranks in one block, which leaf sets split on a
// rail fabric: auto then writes the rail order, which keeps hosts whole,
// and says so, rather than refusing. An order asked for by name is refused.
TEST_F(Cli, RankAutoFallsBackToTheRailOrderWhereTheFormatCannotCarryLeafSets) {
  ASSERT_EQ(weft("topo gen rail --hosts 7 --nics 2 --spines 2 --planes 2 -o " + path("f.json")).rc, 0);
  CliRun rank = weft("rank --topology " + path("f.json") + " --all --format torchrun -o " + path("t.txt"));
  ASSERT_EQ(rank.rc, 0) << rank.err;
  // One line, naming the order written.
  EXPECT_EQ(rank.err.rfind("weft rank: auto ranks this allocation with rail: torchrun cannot carry the clos order "
                           "(torchrun cannot express this order: host '",
                           0),
            0u)
      << rank.err;
  EXPECT_EQ(rank.err.find("weft rank:", 1), std::string::npos) << rank.err;
  EXPECT_NE(rank.err.find(")\nwrote " + path("t.txt") + " (28 ranks, auto (rail) order, torchrun format)\n"),
            std::string::npos)
      << rank.err;
  CliRun rail = weft("rank --topology " + path("f.json") + " --all --algo rail --format torchrun -o " + path("r.txt"));
  ASSERT_EQ(rail.rc, 0) << rail.err;
  EXPECT_EQ(weft::read_file(path("t.txt")).value(), weft::read_file(path("r.txt")).value());
  CliRun named = weft("rank --topology " + path("f.json") + " --all --algo clos --format torchrun -o " + path("c.txt"));
  EXPECT_EQ(named.rc, 1);
  EXPECT_FALSE(fs::exists(path("c.txt")));
}

TEST_F(Cli, RankRefusesAnUnknownCollective) {
  ASSERT_EQ(weft("topo gen rail --hosts 2 --nics 2 --spines 1 -o " + path("f.json")).rc, 0);
  CliRun r = weft("rank --topology " + path("f.json") + " --all --collective allgather -o " + path("r.csv"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "weft: error: unknown --collective 'allgather' (allreduce-hd, allreduce-ring, allreduce-hybrid, "
                   "nccl-ring)\n");
  EXPECT_FALSE(fs::exists(path("r.csv")));
}

struct BadGen {
  const char* name;
  const char* args;
  const char* error;
};

class CliRailBadGen : public Cli, public ::testing::WithParamInterface<BadGen> {};

TEST_P(CliRailBadGen, PrintsOneLineExitsNonZeroAndWritesNothing) {
  CliRun r = weft(std::string("topo gen ") + GetParam().args + " -o " + path("out.json"));
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.err, std::string("weft: error: ") + GetParam().error + "\n");
  EXPECT_FALSE(fs::exists(path("out.json")));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CliRailBadGen,
    ::testing::Values(BadGen{"NoHosts", "rail --hosts 0 --nics 8 --spines 2", "--hosts must be >= 1 (got 0)"},
                      BadGen{"NegativeNics", "rail --hosts 4 --nics -2 --spines 2", "--nics must be >= 1 (got -2)"},
                      BadGen{"NoPlanes", "rail --hosts 4 --nics 2 --spines 2 --planes 0", "--planes must be >= 1 (got 0)"},
                      BadGen{"ClosNoPlanes", "clos --spines 2 --leaves 2 --hosts 2 --planes -1",
                             "--planes must be >= 1 (got -1)"},
                      BadGen{"MoreRailLeavesThanHosts", "rail --hosts 3 --nics 2 --spines 2 --rail-leaves 5",
                             "--rail-leaves (5) must be <= --hosts (3): every rail leaf needs a host"}),
    [](const auto& tp) { return std::string(tp.param.name); });

TEST_F(Cli, ShowRefusesPlanesThatShareASwitch) {
  ASSERT_EQ(weft("topo gen rail --hosts 2 --nics 2 --spines 1 --planes 2 -o " + path("f.json")).rc, 0);
  auto doc = nlohmann::json::parse(weft::read_file(path("f.json")).value());
  doc["links"].push_back({{"a", "pl2-s1"}, {"b", "pl1-r2-l1"}});
  write("bad.json", doc.dump());
  CliRun r = weft("topo show " + path("bad.json") + " --svg " + path("bad.svg"));
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.err, "weft: error: " + path("bad.json") +
                       ": link pl2-s1 - pl1-r2-l1 joins plane 1 and plane 0: planes share no switch and no link\n");
  EXPECT_FALSE(fs::exists(path("bad.svg")));
}

struct BadFabric {
  const char* name;
  const char* command;  // run on bad.json, writing out.*
  bool share_switch;    // else: host h2 misses rail 1
  const char* error;    // after "weft: error: <bad.json>: "
};

class CliRailBadFabric : public Cli, public ::testing::WithParamInterface<BadFabric> {};

TEST_P(CliRailBadFabric, RouteAndSimPrintOneLineAndWriteNothing) {
  const auto& c = GetParam();
  ASSERT_EQ(weft("topo gen rail --hosts 2 --nics 2 --spines 1 --planes 2 -o " + path("f.json")).rc, 0);
  ASSERT_EQ(weft("rank --topology " + path("f.json") + " --all --format csv -o " + path("r.csv")).rc, 0);
  auto doc = nlohmann::json::parse(weft::read_file(path("f.json")).value());
  if (c.share_switch) {
    doc["links"].push_back({{"a", "pl2-s1"}, {"b", "pl1-r2-l1"}});
  } else {
    auto& nics = doc["hosts"][1]["nics"];
    nics.erase(3);  // eth1p1: rail 1 of plane 1
    auto& links = doc["links"];
    for (size_t i = 0; i < links.size(); ++i) {
      if (links[i]["a"] == "h2:eth1p1" || links[i]["b"] == "h2:eth1p1") links.erase(i--);
    }
  }
  write("bad.json", doc.dump());
  std::string cmd = c.command;
  for (auto at = cmd.find("{}"); at != std::string::npos; at = cmd.find("{}")) cmd.replace(at, 2, path(""));
  CliRun r = weft(cmd);
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.err, "weft: error: " + path("bad.json") + ": " + c.error + "\n");
  EXPECT_FALSE(fs::exists(path("out.json")));
  EXPECT_FALSE(fs::exists(path("out.svg")));
}

constexpr const char* kRoute = "route --topology {}bad.json --ranks {}r.csv --collective allreduce-hybrid -o {}out.json";
constexpr const char* kSim = "sim --topology {}bad.json --collective allreduce-hybrid --svg {}out.svg";
constexpr const char* kMissesRail =
    "host 'h2' has no NIC on rail 1 of plane 1: a rail fabric puts NIC g of every host on rail g";
constexpr const char* kShareSwitch =
    "link pl2-s1 - pl1-r2-l1 joins plane 1 and plane 0: planes share no switch and no link";

INSTANTIATE_TEST_SUITE_P(Cases, CliRailBadFabric,
                         ::testing::Values(BadFabric{"RouteHostMissesARail", kRoute, false, kMissesRail},
                                           BadFabric{"SimHostMissesARail", kSim, false, kMissesRail},
                                           BadFabric{"RoutePlanesShareASwitch", kRoute, true, kShareSwitch},
                                           BadFabric{"SimPlanesShareASwitch", kSim, true, kShareSwitch}),
                         [](const auto& tp) { return std::string(tp.param.name); });

}  // namespace
