// weft agent --config: every flag can be set in the TOML file, the file and
// the flag give the same effective configuration (--print-config), the command
// line wins, and bad files are refused naming the file and the key. Also the
// address and port flags that weft agent and weft watch check when parsed.
#include <sys/stat.h>

#include <map>
#include <regex>
#include <set>

#include "cli_fixture.h"

namespace {

struct Setting {
  const char* key;
  const char* flag_value;  // "{dir}" stands for the test's directory
  const char* toml_value;
};

// One non-default value for every key. A new flag of `weft agent` needs a row
// (EveryFlagOfTheAgentHasARow says which).
const Setting kSettings[] = {
    {"listen", "127.0.0.1:7999", "\"127.0.0.1:7999\""},
    {"secret-file", "{dir}/other-secret", "\"{dir}/other-secret\""},
    {"ip", "127.0.0.3", "\"127.0.0.3\""},
    {"name", "rack7-host2", "\"rack7-host2\""},
    {"udp-port", "5001", "5001"},
    {"tcp-port", "5201", "5201"},
    {"probe-dscp", "16", "16"},
    {"reply-dscp", "6", "6"},
    {"metrics", "127.0.0.1:9999", "\"127.0.0.1:9999\""},
    {"log-level", "debug", "\"debug\""},
    {"drain-timeout", "2.5", "2.5"},
    {"max-rate", "2500.5", "2500.5"},
};

class AgentConfigFile : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    write("secret", "weft-config-test-secret-1\n");
    write("other-secret", "weft-config-test-secret-2\n");
    ::chmod(path("secret").c_str(), 0600);
    ::chmod(path("other-secret").c_str(), 0600);
  }
  std::string expand(std::string s) const {
    for (size_t at; (at = s.find("{dir}")) != std::string::npos;) s.replace(at, 5, dir_.string());
    return s;
  }
  // The flags every run needs, less `except` (set by the test instead).
  std::string base(const std::string& except = "") const {
    std::string out;
    if (except != "secret-file") out += " --secret-file " + path("secret");
    if (except != "ip") out += " --ip 127.0.0.1";
    return out;
  }
  CliRun print(const std::string& args) const { return weft("agent --print-config" + args); }
};

class AgentConfigKey : public AgentConfigFile, public ::testing::WithParamInterface<Setting> {};

TEST_P(AgentConfigKey, TheFileAndTheFlagGiveTheSameConfiguration) {
  const Setting& s = GetParam();
  const CliRun by_flag = print(base(s.key) + " --" + s.key + " " + expand(s.flag_value));
  write("agent.toml", std::string(s.key) + " = " + expand(s.toml_value) + "\n");
  const CliRun by_file = print(base(s.key) + " --config " + path("agent.toml"));
  const CliRun by_default = print(base());
  ASSERT_EQ(by_flag.rc, 0) << by_flag.err;
  ASSERT_EQ(by_file.rc, 0) << by_file.err;
  ASSERT_EQ(by_default.rc, 0) << by_default.err;
  EXPECT_EQ(by_file.out, by_flag.out);
  EXPECT_NE(by_flag.out, by_default.out) << s.key << " does not show in --print-config";
}

INSTANTIATE_TEST_SUITE_P(EveryKey, AgentConfigKey, ::testing::ValuesIn(kSettings),
                         [](const auto& p) { return std::regex_replace(p.param.key, std::regex("-"), "_"); });

TEST_F(AgentConfigFile, EveryFlagOfTheAgentHasARow) {
  const CliRun help = weft("agent --help");
  ASSERT_EQ(help.rc, 0);
  std::set<std::string> flags, rows;
  const std::regex long_flag(R"(--([a-z][a-z0-9-]*))");
  for (std::sregex_iterator it(help.out.begin(), help.out.end(), long_flag), end; it != end; ++it) {
    flags.insert((*it)[1]);
  }
  for (const auto& s : kSettings) rows.insert(s.key);
  for (const char* cli_only : {"help", "config", "print-config"}) flags.erase(cli_only);
  EXPECT_EQ(flags, rows) << "every flag of `weft agent --help` needs a row in kSettings";
}

TEST_F(AgentConfigFile, TheCommandLineOverridesTheFile) {
  write("agent.toml", "udp-port = 5000\nname = \"from-file\"\n");
  const CliRun r = print(base() + " --config " + path("agent.toml") + " --udp-port 6000");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("\"udp_port\": 6000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"name\": \"from-file\""), std::string::npos) << r.out;
}

TEST_F(AgentConfigFile, TheWholeConfigurationCanLiveInTheFile) {
  write("agent.toml", "secret-file = \"" + path("secret") + "\"\nip = \"127.0.0.9\"\n");
  const CliRun r = print(" --config " + path("agent.toml"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("\"probe_ip\": \"127.0.0.9\""), std::string::npos) << r.out;
}

TEST_F(AgentConfigFile, WithoutASecretFileItSaysWhereToGiveIt) {
  const CliRun r = print(" --ip 127.0.0.1");
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "weft: error: give --secret-file (or secret-file in the --config file)\n");
}

struct BadFile {
  const char* name;
  const char* text;
  const char* message;  // after "weft: error: config file FILE: "
};

class AgentConfigBadFile : public AgentConfigFile, public ::testing::WithParamInterface<BadFile> {};

TEST_P(AgentConfigBadFile, IsRefusedNamingTheFileAndTheKey) {
  write("agent.toml", GetParam().text);
  const CliRun r = print(base() + " --config " + path("agent.toml"));
  EXPECT_EQ(r.rc, 1);
  const std::string want = "weft: error: config file " + path("agent.toml") + ": " + GetParam().message;
  EXPECT_EQ(r.err.substr(0, want.size()), want) << r.err;
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(
    Files, AgentConfigBadFile,
    ::testing::Values(
        BadFile{"UnknownKey", "udp-port = 5000\nudp_port = 5000\n", "unknown key 'udp_port' (the keys are the flags"},
        BadFile{"CommandLineOnlyKey", "print-config = true\n", "unknown key 'print-config'"},
        BadFile{"Table", "[agent]\nip = \"1.2.3.4\"\n", "unknown key 'agent'"},
        BadFile{"PortOutOfRange", "udp-port = 70000\n", "key 'udp-port': Could not convert: --udp-port = 70000"},
        BadFile{"PortNotANumber", "udp-port = \"x1\"\n", "key 'udp-port': Could not convert: --udp-port = x1"},
        BadFile{"PortAFraction", "tcp-port = 1.5\n", "key 'tcp-port': Could not convert: --tcp-port = 1.5"},
        BadFile{"DscpOutOfRange", "probe-dscp = 64\n", "key 'probe-dscp': --probe-dscp: Value 64 not in range 0 to 63"},
        BadFile{"UnknownLogLevel", "log-level = \"loud\"\n", "key 'log-level': --log-level: loud not in {"},
        BadFile{"MetricsNotAnAddress", "metrics = \"localhost:9100\"\n",
                "key 'metrics': --metrics: --metrics address 'localhost' is not an IPv4 address"},
        BadFile{"NegativeDrain", "drain-timeout = -1\n", "key 'drain-timeout': --drain-timeout: Value -1 not in range"},
        BadFile{"UnpacedRateCap", "max-rate = 0\n", "key 'max-rate': --max-rate: 0 is not a rate in (0, 1e9] probes/s"},
        BadFile{"ADateIsNoValue", "name = 1979-05-27\n", "key 'name': a local_date is not a flag's value"},
        BadFile{"SyntaxError", "udp-port = \n", "[error] toml::parse_key_value_pair"}),
    [](const auto& p) { return std::string(p.param.name); });

// NaN passes a range check (every comparison with it is false): refused by
// name, from the command line or a file.
TEST_F(AgentConfigFile, ADrainTimeoutThatIsNotANumberIsRefused) {
  const CliRun flag = print(base() + " --drain-timeout nan");
  EXPECT_EQ(flag.rc, 1);
  EXPECT_EQ(flag.err, "weft: error: drain timeout must be 0..3600 s, got nan\n");
  write("agent.toml", "drain-timeout = nan\n");
  const CliRun file = print(base() + " --config " + path("agent.toml"));
  EXPECT_EQ(file.rc, 1);
  EXPECT_NE(file.err.find("drain timeout must be 0..3600 s, got nan"), std::string::npos) << file.err;
  EXPECT_EQ(file.out, "");
}

// Port 0 would bind the reflector to an ephemeral port that no controller
// knows: every probe to --dport would go unanswered.
TEST_F(AgentConfigFile, AUdpPortOfZeroIsRefusedFromTheFlagOrTheFile) {
  const std::string want = "weft: error: --udp-port must be the port probes arrive at (4791 for RoCEv2), not 0\n";
  const CliRun flag = print(base() + " --udp-port 0");
  EXPECT_EQ(flag.rc, 1);
  EXPECT_EQ(flag.err, want);
  EXPECT_EQ(flag.out, "");
  write("agent.toml", "udp-port = 0\n");
  const CliRun file = print(base() + " --config " + path("agent.toml"));
  EXPECT_EQ(file.rc, 1);
  EXPECT_EQ(file.err, want);
  EXPECT_EQ(file.out, "");
}

// `weft watch --metrics` is checked as `weft agent --metrics` is: a port that
// is no number 0..65535 is refused when the command line is read (atoi(3)
// made "abc" port 0 and 70000 port 4464).
struct WatchMetricsAddress {
  const char* name;
  const char* address;
  const char* message;
};

class WatchMetricsFlag : public Cli, public ::testing::WithParamInterface<WatchMetricsAddress> {};

TEST_P(WatchMetricsFlag, IsRefusedNamingThePart) {
  const CliRun r = weft(std::string("watch --metrics ") + GetParam().address);
  EXPECT_EQ(r.rc, 105);  // CLI11's ValidationError
  EXPECT_EQ(r.err, std::string("weft: error: --metrics: ") + GetParam().message +
                       " (weft watch --help lists the options)\n");
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(
    Addresses, WatchMetricsFlag,
    ::testing::Values(
        WatchMetricsAddress{"PortNotANumber", "127.0.0.1:abc",
                            "--metrics port 'abc' in '127.0.0.1:abc' is not a number 0..65535"},
        WatchMetricsAddress{"PortOver65535", "127.0.0.1:70000",
                            "--metrics port '70000' in '127.0.0.1:70000' is not a number 0..65535"},
        WatchMetricsAddress{"NoPort", "127.0.0.1", "--metrics '127.0.0.1' is not ADDR:PORT"},
        WatchMetricsAddress{"NotAnAddress", "localhost:9741",
                            "--metrics address 'localhost' is not an IPv4 address"}),
    [](const auto& p) { return std::string(p.param.name); });

TEST_F(AgentConfigFile, AMissingFileIsAnError) {
  const CliRun r = print(base() + " --config " + path("absent.toml"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("config file " + path("absent.toml")), std::string::npos) << r.err;
}

}  // namespace
