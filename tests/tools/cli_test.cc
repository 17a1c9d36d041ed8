// The weft CLI as a user meets it: generated files, JSON for scripts, and bad
// input answered by one line on stderr, a non-zero exit and no output file.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_fixture.h"

namespace {

// Command lines the parser refuses: one line too, naming the help to read,
// with CLI11's exit code; a mistyped command, an option before the command
// and an empty command line are called what they are, with the commands
// (CLI11 alone says "A subcommand is required" to each).
TEST_F(Cli, ParseErrorsAreOneLineNamingTheHelpToRead) {
  struct Refused {
    const char* args;
    int rc;
    const char* error;
  };
  for (const Refused& c : {
           Refused{"demo --bogus", 109,
                   "The following argument was not expected: --bogus (weft demo --help lists the options)"},
           Refused{"topo gen clos --spines x", 104,
                   "Could not convert: --spines = x (weft topo gen clos --help lists the options)"},
           Refused{"rank", 106, "--topology is required (weft rank --help lists the options)"},
           Refused{"dmeo", 106,
                   "unknown command 'dmeo' (topo, rank, check, route, sim, demo, agent, probe, watch, bench)"},
           Refused{"--bogus", 106,
                   "unknown option '--bogus': a command comes first (topo, rank, check, route, sim, demo, agent, "
                   "probe, watch, bench; weft --help explains them)"},
           Refused{"", 106,
                   "no command given (topo, rank, check, route, sim, demo, agent, probe, watch, bench; weft --help "
                   "explains them)"}}) {
    CliRun r = weft(c.args);
    EXPECT_EQ(r.rc, c.rc) << c.args;
    EXPECT_EQ(r.err, std::string("weft: error: ") + c.error + "\n") << c.args;
    EXPECT_EQ(r.out, "") << c.args;
  }
  // --help is no error: the help on stdout, exit 0.
  CliRun r = weft("demo --help");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("Usage: weft demo [OPTIONS]"), std::string::npos) << r.out;
}

TEST_F(Cli, GenShowPrintsTheNormalisedFabricForScripts) {
  ASSERT_EQ(weft("topo gen bigraph --switches 4 --subnodes 2 -o " + path("bg.json")).rc, 0);
  CliRun r = weft("topo show " + path("bg.json") + " --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "bigraph");
  EXPECT_EQ(j["hosts"].size(), 8u);
  EXPECT_EQ(j["hosts"][0]["nics"][0]["switch"], "u1");
  EXPECT_EQ(j["switches"][0]["part"], "upper");
  EXPECT_EQ(j["switches"][3]["part"], "lower");
  EXPECT_EQ(j["switches"][0]["tier"], 0);
  EXPECT_EQ(j["links"].size(), 8u + 4u);  // 8 access + 2x2 upper-lower
  EXPECT_EQ(j["links"][8]["state"], "up");
  EXPECT_EQ(j["links"][8]["gbps"], 100.0);
}

TEST_F(Cli, RankThenCheckShowsLoadOneForLeafSetsOnAFullClos) {
  ASSERT_EQ(weft("topo gen clos --spines 4 --leaves 4 --hosts 4 -o " + path("f.json")).rc, 0);
  ASSERT_EQ(weft("rank --topology " + path("f.json") + " --all --algo clos --format openmpi -o " + path("r.txt")).rc, 0);
  CliRun r = weft("check --topology " + path("f.json") + " --ranks " + path("r.txt") + " --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["max_load"], 1);
  EXPECT_EQ(j["steps"].size(), 8u);
}

struct BadInput {
  const char* name;
  const char* setup;  // topology file text, or "" for a generated 2x2x2 Clos
  const char* hosts;  // hosts file text
  const char* args;   // after "rank --topology T --hosts H -o OUT"
  const char* error;  // expected stderr line
};

class CliBadInput : public Cli, public ::testing::WithParamInterface<BadInput> {};

TEST_P(CliBadInput, PrintsOneLineExitsNonZeroAndWritesNothing) {
  const auto& p = GetParam();
  if (std::string(p.setup).empty()) {
    ASSERT_EQ(weft("topo gen clos --spines 2 --leaves 2 --hosts 2 -o " + path("t.json")).rc, 0);
  } else {
    write("t.json", p.setup);
  }
  write("hosts", p.hosts);
  CliRun r = weft("rank --topology " + path("t.json") + " --hosts " + path("hosts") + " -o " + path("out") + " " + p.args);
  EXPECT_NE(r.rc, 0);
  std::string expected = std::string("weft: error: ") + p.error + "\n";
  for (auto [var, file] : {std::pair{"$T", "t.json"}, std::pair{"$H", "hosts"}}) {
    if (auto at = expected.find(var); at != std::string::npos) expected.replace(at, 2, path(file));
  }
  EXPECT_EQ(r.err, expected);
  EXPECT_FALSE(fs::exists(path("out")));
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find("out.tmp"), std::string::npos) << "temporary left behind";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CliBadInput,
    ::testing::Values(
        BadInput{"malformed_topology", "{\"switches\": [}", "h1-1\n", "--format csv",
                 "$T: parse error at line 1, column 15: syntax error while parsing value - unexpected '}'; "
                 "expected '[', '{', or a literal"},
        BadInput{"host_not_in_topology", "", "h1-1\nh9-1\n", "--format csv",
                 "$H: host 'h9-1' is not in the topology 'clos2-2x2x2x1'"},
        BadInput{"duplicate_host", "", "h1-1\nh1-2\nh1-1 slots=1\n", "--format csv",
                 "$H: duplicate host: 'h1-1' lists h1-1:eth0 a second time"},
        BadInput{"unknown_format", "", "h1-1\n", "--format lsf",
                 "unknown --format 'lsf' (openmpi, mpich, slurm, hccl, torchrun, csv)"},
        BadInput{"unknown_algo", "", "h1-1\n", "--algo fast", "unknown --algo 'fast' (auto, clos, hdrm, ring, rail, naive)"},
        BadInput{"slurm_second_nic_of_a_host",
                 R"({"switches": [{"name": "s1", "tier": 1}, {"name": "l1"}],
                     "hosts": [{"name": "h1", "nics": [{"name": "eth0", "switch": "l1"}, {"name": "eth1", "switch": "l1"}]},
                               {"name": "h2", "nics": [{"name": "eth0", "switch": "l1"}]}],
                     "links": [{"a": "s1", "b": "l1"}]})",
                 "h1:eth1\nh2\n", "--format slurm --algo naive",
                 "slurm cannot express this order: it names hosts only, and a host's k-th rank runs on its k-th NIC, "
                 "so rank 0 would run on h1:eth0 where the order puts h1:eth1; use --format csv or hccl, which "
                 "name each rank's NIC"},
        BadInput{"hdrm_on_clos", "", "h1-1\n", "--algo hdrm",
                 "hdrm needs a BiGraph fabric: h1-1:eth0 attaches to switch 'l1', which is in neither part (use "
                 "--algo clos)"},
        BadInput{"empty_hosts", "", "# nobody\n", "--format csv", "$H: the allocation is empty: no hosts given"},
        BadInput{"rail_host_misses_a_rail",
                 R"({"kind": "rail", "switches": [{"name": "s1", "tier": 1}, {"name": "a", "rail": 0}, {"name": "b", "rail": 1}],
                     "hosts": [{"name": "h1", "nics": [{"switch": "a"}, {"switch": "b"}]}, {"name": "h2", "nics": [{"switch": "a"}]}],
                     "links": [{"a": "s1", "b": "a"}, {"a": "s1", "b": "b"}]})",
                 "h1\n", "--format csv",
                 "$T: host 'h2' has no NIC on rail 1: a rail fabric puts NIC g of every host on rail g"},
        BadInput{"planes_share_a_switch",
                 R"({"switches": [{"name": "s1", "tier": 1, "plane": 0}, {"name": "a", "plane": 0}, {"name": "b", "plane": 1}],
                     "hosts": [{"name": "h1", "nics": [{"switch": "a"}, {"switch": "b"}]}],
                     "links": [{"a": "s1", "b": "a"}, {"a": "s1", "b": "b"}]})",
                 "h1\n", "--format csv",
                 "$T: link s1 - b joins plane 0 and plane 1: planes share no switch and no link"}),
    [](const auto& p) { return std::string(p.param.name); });

// Output that cannot be written is an error, whatever printed it (a file
// written at once, or fmt::print's buffered lines), never exit 0 with a
// truncated result and never an abort.
struct StdoutCase {
  const char* name;
  const char* args;      // $F: a generated 8x8x8 Clos, $R: its rank file
  const char* redirect;  // of standard output
  const char* error;     // expected stderr
};

class CliStdout : public Cli, public ::testing::WithParamInterface<StdoutCase> {};

TEST_P(CliStdout, AnUnwritableStandardOutputIsOneErrorLineAndExitOne) {
  const auto& p = GetParam();
  ASSERT_EQ(weft("topo gen clos --spines 8 --leaves 8 --hosts 8 -o " + path("f.json")).rc, 0);
  ASSERT_EQ(weft("rank --topology " + path("f.json") + " --all -o " + path("r.csv")).rc, 0);
  std::string args = p.args;
  for (auto [var, file] : {std::pair{"$F", "f.json"}, std::pair{"$R", "r.csv"}}) {
    if (auto at = args.find(var); at != std::string::npos) args.replace(at, 2, path(file));
  }
  CliRun r = weft(args, p.redirect);
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, std::string("weft: error: ") + p.error + "\n");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CliStdout,
    ::testing::Values(
        StdoutCase{"gen_to_full_device", "topo gen clos --spines 2 --leaves 2 --hosts 2", ">/dev/full",
                   "writing standard output: No space left on device"},
        StdoutCase{"gen_to_closed_descriptor", "topo gen clos --spines 2 --leaves 2 --hosts 2", ">&-",
                   "writing standard output: Bad file descriptor"},
        StdoutCase{"rank_to_full_device", "rank --topology $F --all", ">/dev/full",
                   "writing standard output: No space left on device"},
        StdoutCase{"long_json_to_full_device", "topo show $F --json", ">/dev/full",
                   "writing standard output: No space left on device"},
        StdoutCase{"short_table_to_full_device", "topo show $F", ">/dev/full",
                   "writing standard output: No space left on device"},
        StdoutCase{"check_json_to_full_device", "check --topology $F --ranks $R --json", ">/dev/full",
                   "writing standard output: No space left on device"},
        StdoutCase{"help_to_full_device", "--help", ">/dev/full", "writing standard output: No space left on device"},
        StdoutCase{"command_help_to_full_device", "rank --help", ">/dev/full",
                   "writing standard output: No space left on device"},
        StdoutCase{"version_to_closed_descriptor", "--version", ">&-", "writing standard output: Bad file descriptor"}),
    [](const auto& p) { return std::string(p.param.name); });

// A rank table with NICs the topology gives no address is written (HCCL
// tables are often completed by hand) with one warning naming them.
TEST_F(Cli, AnHcclTableOfNicsWithoutAddressesWarnsNamingThem) {
  ASSERT_EQ(weft("topo gen clos --spines 2 --leaves 2 --hosts 3 -o " + path("f.json")).rc, 0);
  CliRun r = weft("rank --topology " + path("f.json") + " --all --format hccl -o " + path("t.json"));
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.err.find("weft rank: warning: 6 NIC(s) have no address in the topology (h1-1:eth0, h1-2:eth0, h1-3:eth0, "
                       "h2-1:eth0, ...): their device_ip is 0.0.0.0"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::exists(path("t.json")));
}

TEST_F(Cli, TopoInferRefusesACampaignIdBelowOne) {
  for (const char* id : {"0", "-5", "00"}) {
    CliRun r = weft(std::string("topo infer --db ") + path("none.db") + " --campaign " + id);
    EXPECT_EQ(r.rc, 1) << id;
    EXPECT_EQ(r.err, "weft: error: --campaign " + std::to_string(std::stoi(id)) +
                         ": a campaign id is >= 1 (weft probe prints it)\n");
    EXPECT_FALSE(fs::exists(path("none.db"))) << "nothing opened";
  }
}

TEST_F(Cli, HdrmWithTooManySubnodesPerSwitchIsRejected) {
  ASSERT_EQ(weft("topo gen bigraph --switches 4 --subnodes 3 -o " + path("bg.json")).rc, 0);
  CliRun r = weft("rank --topology " + path("bg.json") + " --all --algo hdrm -o " + path("out"));
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.err, "weft: error: hdrm: M = 3 subnodes per switch exceeds N/2 = 2 (an M x N BiGraph needs M <= N/2)\n");
  EXPECT_FALSE(fs::exists(path("out")));
}

// --listen is ADDR:PORT with a whole number for the port: ":abc" was read
// as port 0 (any port) before, and "7400x" as 7400.
TEST_F(Cli, AgentRejectsAListenPortThatIsNotWhollyANumber) {
  for (const char* port : {"abc", "", "7400x", "-1", "65536", "99999999999"}) {
    const CliRun r = weft(std::string("agent --secret-file none --listen 127.0.0.1:") + port);
    EXPECT_EQ(r.rc, 1) << port;
    EXPECT_NE(r.err.find(std::string("--listen port '") + port + "' in '127.0.0.1:" + port + "' is not a number 0..65535"),
              std::string::npos)
        << r.err;
  }
  const CliRun r = weft("agent --secret-file none --listen 300.1.2.3:7400");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("--listen address '300.1.2.3' is not an IPv4 address"), std::string::npos) << r.err;
}

TEST_F(Cli, AgentRejectsAMaxRateOutsideItsRange) {
  for (const char* rate : {"0", "-5", "2e9", "fast"}) {
    const CliRun r = weft(std::string("agent --secret-file none --ip 127.0.0.1 --max-rate ") + rate);
    EXPECT_NE(r.rc, 0) << rate;
    EXPECT_NE(r.err.find("is not a rate in (0, 1e9] probes/s"), std::string::npos) << r.err;
  }
  const CliRun r = weft("agent --secret-file none");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("give --ip"), std::string::npos) << r.err;
}

TEST_F(Cli, GenRejectsBadSizesWithoutWriting) {
  // 0 and negatives too: one rule, not a ">= 1" that 1 then also fails.
  for (const char* n : {"5", "1", "0", "-2"}) {
    CliRun r = weft(std::string("topo gen bigraph --switches ") + n + " --subnodes 2 -o " + path("bg.json"));
    EXPECT_NE(r.rc, 0) << n;
    EXPECT_EQ(r.err, fmt::format("weft: error: --switches must be even and >= 2: BiGraph splits them into two parts "
                                 "(got {})\n", n));
    EXPECT_FALSE(fs::exists(path("bg.json"))) << n;
  }
}

}  // namespace
