// weft demo as a user meets it where no fabric can be emulated (--simulate,
// the path a machine without root takes): the table, the ratio, the SVG, the
// JSON; and bad options answered by one line, nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_fixture.h"

namespace {

TEST_F(Cli, DemoSimulatesTheSameFabricAndReportsTheRatioAndTheIdeal) {
  CliRun r = weft("demo --simulate --size 4MiB --trials 3 --svg " + path("d.svg") + " --json " + path("d.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("simulated 4x4x4 Clos, links 200 Mbit/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("averaged over 3 hash seeds:\n"), std::string::npos) << r.out;
  // The case list calls weft's plan (c) and leaf sets on ECMP (b); the table's (b) is weft's.
  EXPECT_NE(r.out.find("(a) = (a) above, the mean over 3 hash seeds; (b) = (c) above, weft order + planned ports"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("link utilisation"), std::string::npos);
  // The table's seed column names the seeds (a) is the mean over.
  EXPECT_NE(r.out.find("\n    1    1-3  "), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(weft::read_file(path("d.json")).value());
  ASSERT_EQ(j["trials"].size(), 1u);
  const auto& t = j["trials"][0];
  EXPECT_EQ(t["hash_seed"], 1);
  EXPECT_EQ(t["hash_seeds"], 3);
  // weft's plan on a non-blocking Clos: every step at load 1, the ideal busbw (the link rate).
  EXPECT_EQ(t["max_load_b"], 1);
  EXPECT_EQ(t["lower_bound_b"], 1);
  EXPECT_NEAR(t["busbw_b_Bps"].get<double>(), 200e6 / 8, 1e3);
  EXPECT_NEAR(t["ideal_Bps"].get<double>(), 200e6 / 8, 1e3);
  EXPECT_GE(t["ratio"].get<double>(), 1.5) << "ECMP collisions cost the shuffled order at least a third";
  // The run's wall time, as the emulated demo's: simulating takes some.
  EXPECT_GT(j["seconds"].get<double>(), 0.0);
  const std::string svg = weft::read_file(path("d.svg")).value();
  EXPECT_NE(svg.find("(a) input order, ECMP (simulated)"), std::string::npos);
  EXPECT_NE(svg.find("(b) weft order + plan (simulated)"), std::string::npos);
}

TEST_F(Cli, DemoWithAFailedLinkPlansToTheNewBoundAndDrawsItDown) {
  CliRun r = weft("demo --simulate --size 4MiB --trials 2 --fail 2:3 --svg " + path("d.svg") + " --json " + path("d.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(weft::read_file(path("d.json")).value());
  ASSERT_EQ(j["trials"].size(), 2u);
  const auto& f = j["trials"][1];
  EXPECT_TRUE(f["failed_link"].get<bool>());
  // Leaf 3 keeps 3 uplinks for its 4 hosts: HD's cross-leaf steps (d = 4, 8,
  // rs and ag) would need 2 flows on one; in 2 rounds each link carries one.
  EXPECT_EQ(f["lower_bound_b"], 1);
  EXPECT_EQ(f["max_load_b"], 1);
  EXPECT_EQ(f["rounds_b"], 2);
  EXPECT_EQ(f["steps_in_rounds_b"], 4);
  EXPECT_EQ(f["single_round_bound_b"], 2);
  // Those 4 of 8 steps, 3/16 of the bytes, take twice as long: 15/8 against
  // 9/4 of B / c (tests/routing/rounds_test.cc), 5/6 of the link rate.
  EXPECT_NEAR(f["ideal_Bps"].get<double>(), 200e6 / 8 * 5 / 6, 1e3);
  EXPECT_NE(r.out.find("4 steps in 2 rounds, load per round (one round: bound 2)"), std::string::npos) << r.out;
  EXPECT_NE(weft::read_file(path("d.svg")).value().find("s2 - l3: 0% (down)"), std::string::npos);
}

// What a user without root sees: the reason, then the simulator. As root the
// test drops to nobody with setpriv(1).
TEST_F(Cli, DemoWithoutRootSaysSoAndSimulatesTheSameFabric) {
  const bool drop = ::geteuid() == 0;
  if (drop && ::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "root, and no setpriv to drop privileges with";
  const std::string args = "demo --size 4MiB --trials 1 --svg ''";
  CliRun r;
  if (!drop) {
    r = weft(args);
  } else {
    const std::string out = path("stdout"), err = path("stderr");
    const std::string cmd = std::string("setpriv --reuid 65534 --regid 65534 --clear-groups ") + WEFT_BINARY_DIR +
                            "/weft " + args + " >" + out + " 2>" + err;
    const int st = std::system(cmd.c_str());
    r = {WIFEXITED(st) ? WEXITSTATUS(st) : -1, weft::read_file(out).value(), weft::read_file(err).value()};
  }
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("weft demo: cannot emulate the fabric: not running as root", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("Running the simulator on the same fabric instead."), std::string::npos);
  EXPECT_NE(r.out.find("simulated 4x4x4 Clos, links 200 Mbit/s"), std::string::npos);
  EXPECT_NE(r.out.find("averaged over 1 hash seed:\n"), std::string::npos) << r.out;
}

// The SVG and JSON are written at the end of a run of minutes; a path that
// cannot take them is refused before anything runs, and the probe file
// that found out is gone.
TEST_F(Cli, DemoRefusesAnOutputPathItCannotWriteBeforeRunningAnything) {
  CliRun r = weft("demo --simulate --size 4MiB --trials 1 --svg '' --json " + path("no/d.json"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "weft: error: --json " + path("no/d.json") + ": cannot create a file there: No such file or directory\n");
  EXPECT_EQ(r.out, "");
  r = weft("demo --simulate --size 4MiB --trials 1 --svg " + path("no/d.svg"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "weft: error: --svg " + path("no/d.svg") + ": cannot create a file there: No such file or directory\n");
  EXPECT_EQ(r.out, "");
  fs::create_directories(path("out.svg"));
  r = weft("demo --simulate --size 4MiB --trials 1 --svg " + path("out.svg"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "weft: error: --svg " + path("out.svg") + " is a directory\n");
  EXPECT_EQ(r.out, "");
  // A writable path passes the check and gets the file; the check's own file is gone.
  r = weft("demo --simulate --size 4MiB --trials 1 --svg " + path("d.svg"));
  ASSERT_EQ(r.rc, 0) << r.err;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir_)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"d.svg", "out.svg", "stderr", "stdout"}));
}

struct BadDemo {
  const char* name;
  const char* args;
  const char* error;
};

class DemoRejects : public Cli, public ::testing::WithParamInterface<BadDemo> {};

TEST_P(DemoRejects, WithOneLineAndNoFiles) {
  CliRun r = weft(std::string("demo --simulate --svg ") + path("d.svg") + " --json " + path("d.json") + " " +
                  GetParam().args);
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.err, std::string("weft: error: ") + GetParam().error + "\n");
  EXPECT_FALSE(fs::exists(path("d.svg")));
  EXPECT_FALSE(fs::exists(path("d.json")));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DemoRejects,
    ::testing::Values(
        BadDemo{"NoSuchLink", "--fail 5:1", "--fail 5:1: no such link (spines 1..4, leaves 1..4)"},
        BadDemo{"NotALink", "--fail 2-3", "--fail '2-3' is not SPINE:LEAF"},
        BadDemo{"OddSize", "--size 7", "--size must be a multiple of 4 bytes (f32 elements)"},
        BadDemo{"ZeroSize", "--size 0", "--size must be at least 4 bytes (one f32 element)"},
        BadDemo{"ZeroCallSize", "--fail-during 2:3@5s --call-size 0", "--call-size must be at least 4 bytes (one f32 element)"},
        BadDemo{"MtuBelowIpv4Minimum", "--mtu 575", "--mtu 575 is not 576..65535"},
        BadDemo{"MtuAboveVethMaximum", "--mtu 65536", "--mtu 65536 is not 576..65535"},
        BadDemo{"UnknownOrder", "--order random", "--order 'random' is not shuffled, interleaved or sorted"},
        BadDemo{"NoTrials", "--trials 0", "--trials 0 is not 1..100"},
        BadDemo{"OneHost", "--leaves 1 --hosts 1", "an AllReduce needs at least 2 hosts"},
        BadDemo{"TooFewProbePorts", "--probe-ports 3",
                "--probe-ports 3 is not 4..4096: the campaign needs a source port per spine at least (--spines 4)"},
        BadDemo{"MoreSpinesThanDefaultProbePorts", "--spines 40",
                "--probe-ports 32 is not 40..4096: the campaign needs a source port per spine at least (--spines 40)"},
        BadDemo{"PrefixTheScriptRefuses", "--prefix 'Bad_ns'",
                "--prefix: namespace prefix 'Bad_ns' may hold only a-z, 0-9 and '-'"},
        BadDemo{"FailDuringWithoutTime", "--fail-during 2:3",
                "--fail-during '2:3' is not SPINE:LEAF@CUT[:RESTORE] (e.g. 2:3@10s)"},
        BadDemo{"FailDuringBadTime", "--fail-during 2:3@soon", "--fail-during '2:3@soon' is not SPINE:LEAF@CUT[:RESTORE] (e.g. 2:3@10s)"},
        BadDemo{"FailDuringNoSuchLink", "--fail-during 9:1@5s", "--fail-during 9:1: no such link (spines 1..4, leaves 1..4)"},
        BadDemo{"FailDuringCutAfterTheEnd", "--fail-during 2:3@40s",
                "--fail-during: the cut at 40 s must fall inside the 30 s timeline"},
        BadDemo{"FailDuringRestoreBeforeTheCut", "--fail-during 2:3@10s:5s",
                "--fail-during: the restore at 5 s must fall after the cut (10 s) and inside the 30 s timeline"},
        BadDemo{"FailDuringRestoreAfterTheEnd", "--fail-during 2:3@10s --timeline 15s",
                "--fail-during: the restore at 20 s must fall after the cut (10 s) and inside the 15 s timeline"},
        BadDemo{"FailAndFailDuring", "--fail 2:3 --fail-during 2:3@5s",
                "--fail and --fail-during do not go together (one failure at a time)"},
        BadDemo{"NegativeConvergence", "--fail-during 2:3@5s --converge-ms -1", "--converge-ms -1 is not 0..60000"},
        BadDemo{"FailDuringSimulated", "--fail-during 2:3@5s",
                "--fail-during runs on the emulated fabric only (drop --simulate)"},
        BadDemo{"TimelineWithoutFailDuring", "--timeline 10s",
                "--timeline needs --fail-during (it shapes the timeline of a link that fails mid-run)"},
        BadDemo{"CallSizeWithoutFailDuring", "--call-size 1MiB",
                "--call-size needs --fail-during (it shapes the timeline of a link that fails mid-run)"},
        BadDemo{"ConvergenceWithoutFailDuring", "--converge-ms 100",
                "--converge-ms needs --fail-during (it shapes the timeline of a link that fails mid-run)"}),
    [](const auto& c) { return std::string(c.param.name); });

}  // namespace
