// weft sim as a user meets it: the (a)-(d) table, the SVG plot, JSON for
// scripts, and bad input answered by one line and no plot file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_fixture.h"

namespace {

TEST_F(Cli, SimComparesFourWaysAndPlotsBusbwAgainstEndpoints) {
  CliRun r = weft("sim --spines 4 --hosts-per-leaf 4 --leaves 2,4 --size 4MiB --svg " + path("p.svg"));
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* row : {"(a) default", "(b) leaf sets + ECMP", "(c) weft", "(d) ideal switch"}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row << " in\n" << r.out;
  }
  const std::string svg = weft::read_file(path("p.svg")).value();
  size_t lines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++lines;
  EXPECT_EQ(lines, 4u) << "one line per case";
  EXPECT_NE(svg.find("busbw (GB/s)"), std::string::npos);
}

TEST_F(Cli, SimJsonGivesPerLinkUtilisationForOneFabric) {
  ASSERT_EQ(weft("topo gen clos --spines 4 --leaves 2 --hosts 4 -o " + path("f.json")).rc, 0);
  CliRun r = weft("sim --topology " + path("f.json") + " --collective allreduce-ring --size 1MiB --svg '' --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["endpoints"], 8);
  ASSERT_EQ(j[0]["cases"].size(), 4u);
  const auto& weft_case = j[0]["cases"][2];
  EXPECT_EQ(weft_case["max_load"], 1);
  EXPECT_FALSE(weft_case["utilisation"].empty());
  for (const auto& [link, u] : weft_case["utilisation"].items()) EXPECT_LE(u.get<double>(), 1.0 + 1e-9) << link;
  EXPECT_FALSE(fs::exists(path("weft-sim.svg")));
}

// A NIC whose access link is down has no route: the default allocation
// (every NIC) leaves it out and names it, rather than failing on its flows.
TEST_F(Cli, SimLeavesOutANicWhoseAccessLinkIsDownAndNamesIt) {
  ASSERT_EQ(weft("topo gen clos --spines 2 --leaves 2 --hosts 2 -o " + path("f.json")).rc, 0);
  auto topo = nlohmann::json::parse(weft::read_file(path("f.json")).value());
  for (auto& l : topo["links"]) {
    if (l["a"] == "h1-1:eth0") l["state"] = "down";
  }
  ASSERT_TRUE(weft::write_file_atomic(path("down.json"), topo.dump()));
  CliRun r = weft("sim --topology " + path("down.json") + " --size 1MiB --svg '' --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "weft sim: clos2-2x2x2x1: leaving out 1 NIC(s) whose access link is down: h1-1:eth0 (to 'l1') "
                   "(--hosts to choose)\n");
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["endpoints"], 3);
}

class SimCliRail : public Cli, public ::testing::WithParamInterface<const char*> {};

TEST_P(SimCliRail, ComparesFourWaysOnDualPlaneRailFabricsAndNamesTheKindInThePlot) {
  CliRun r = weft(std::string("sim --fabric rail --nics 2 --planes 2 --spines 2 --hosts-per-leaf 2 --leaves 1,2 "
                              "--size 1MiB --collective ") + GetParam() + " --svg " + path("p.svg"));
  ASSERT_EQ(r.rc, 0) << r.err;
  // 2 and 4 hosts x 2 NICs x 2 ports; planned routes at load 1, the ideal at 100%.
  for (const char* row : {"       8  (c) weft", "      16  (c) weft", "      16  (d) ideal switch"}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row << " in\n" << r.out;
  }
  EXPECT_NE(r.err.find("on rail-4h-2r-2l-2s-2p (16 endpoints)"), std::string::npos) << r.err;
  const std::string svg = weft::read_file(path("p.svg")).value();
  EXPECT_NE(svg.find(std::string(GetParam()) + " of 1.0 MiB on rail, 2 planes, busbw"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Collectives, SimCliRail,
                         ::testing::Values("allreduce-hd", "allreduce-ring", "allreduce-hybrid"),
                         [](const auto& tp) {
                           std::string n = tp.param;
                           return n.substr(n.find('-') + 1);
                         });

struct BadSim {
  const char* name;
  const char* args;
  const char* error;
};

class SimCliBadInput : public Cli, public ::testing::WithParamInterface<BadSim> {};

TEST_P(SimCliBadInput, PrintsOneLineExitsNonZeroAndWritesNoPlot) {
  CliRun r = weft(std::string("sim ") + GetParam().args + " --svg " + path("p.svg"));
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.err, std::string("weft: error: ") + GetParam().error + "\n");
  EXPECT_FALSE(fs::exists(path("p.svg")));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SimCliBadInput,
    ::testing::Values(
        BadSim{"unknown_collective", "--collective allgather",
               "unknown --collective 'allgather' (allreduce-hd, allreduce-ring, allreduce-hybrid, nccl-ring)"},
        BadSim{"unknown_fabric", "--fabric torus", "unknown --fabric 'torus' (clos, rail)"},
        BadSim{"bad_leaves", "--leaves 2,x", "bad --leaves '2,x' (a comma-separated list of counts >= 1, e.g. 2,4,8)"},
        BadSim{"bad_size", "--size 3", "bad --size '3' (a multiple of 4 bytes, e.g. 64MiB)"},
        BadSim{"unknown_hash", "--hash md5", "unknown hash model 'md5' (crc32, crc32-qp, linux-l4, linux-l3)"},
        BadSim{"no_trials", "--leaves 2 --trials 0", "clos2-8x2x8x1: trials must be >= 1 (got 0)"},
        BadSim{"nan_latency", "--latency-us nan", "--latency-us must be a finite number >= 0 (got nan)"},
        BadSim{"negative_latency", "--latency-us -0.5", "--latency-us must be a finite number >= 0 (got -0.5)"},
        BadSim{"no_shm_rate", "--shm-gbps 0", "--shm-gbps must be a finite number > 0 (got 0)"},
        BadSim{"size_that_wraps_to_1GiB", "--size 17179869185G",
               "bad --size '17179869185G' (a multiple of 4 bytes, e.g. 64MiB)"},
        BadSim{"one_endpoint", "--leaves 1 --hosts-per-leaf 1",
               "clos2-8x1x1x1: a collective needs at least 2 endpoints, the allocation has 1"}),
    [](const auto& p) { return std::string(p.param.name); });

// The plot is written after the simulation, which takes minutes at scale:
// a path it cannot be written to fails before any of it.
TEST_F(Cli, SimRefusesAnUnwritablePlotPathBeforeSimulating) {
  CliRun r = weft("sim --leaves 2,4 --svg " + path("no/p.svg"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "weft: error: --svg " + path("no/p.svg") + ": cannot create a file there: No such file or directory\n");
  EXPECT_EQ(r.out, "");
}

}  // namespace
