// weft agent as a service, as systemd runs it: SIGHUP re-reads the config
// file (the secret, the rate cap and log level live, the rest at the next start), SIGTERM
// drains (no new sessions; the campaign in progress completes; past the
// drain timeout running sweeps are cancelled), and every exit is status 0.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <fmt/format.h>

#include "loopback_agents.h"

namespace weft::test {
namespace {

bool exited_zero(int status) { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool control_port_refuses(const std::string& ip, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  const bool refused = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno == ECONNREFUSED;
  ::close(fd);
  return refused;
}

using AgentService = LoopbackAgents;

TEST_F(AgentService, SighupRotatesTheSecretAndKeepsWhatNeedsARestart) {
  for (int i = 0; i < kAgents; ++i) {
    write_config(i);
    start_agent(i);
  }
  ASSERT_TRUE(probe("--ports 8").ok());
  write("old-secret", slurp(path("secret")));
  ::chmod(path("old-secret").c_str(), 0600);
  write("secret", "weft-loopback-rotated-secret\n");
  write_config(0, "", static_cast<uint16_t>(udp_port_ + 1));  // needs a restart
  write_config(1, "max-rate = 2500\n");                          // live
  for (int i = 0; i < kAgents; ++i) agents_[i]->signal(SIGHUP);
  for (int i = 0; i < kAgents; ++i) {
    const std::string want =
        fmt::format("reload: secret, max rate ({} probes/s) and log level (info) applied", i == 1 ? 2500 : 100000);
    ASSERT_TRUE(wait_until([&] { return log(i).find(want) != std::string::npos; }, 10000)) << log(i);
  }
  EXPECT_NE(log(0).find("reload: 'udp-port' changed; it takes a restart"), std::string::npos) << log(0);
  EXPECT_EQ(log(1).find("changed; it takes a restart"), std::string::npos) << log(1);

  const Probe old_secret = probe("--ports 8", "old-secret");
  EXPECT_FALSE(old_secret.ok()) << old_secret.out;
  EXPECT_NE(old_secret.err.find("auth"), std::string::npos) << old_secret.err;
  // The new secret works, and the reflector still answers on the port it started with.
  const Probe rotated = probe("--ports 8");
  ASSERT_TRUE(rotated.ok()) << rotated.err;
  EXPECT_NE(rotated.out.find("16 5-tuples (16 answered)"), std::string::npos) << rotated.out;
  // The controller asked for its default 100000 probes/s: agent 1 capped it
  // to the 2500 its reloaded file gives, agent 0 did not.
  for (int i = 0; i < kAgents; ++i) {
    auto body = http_get(metrics_port_[i], "/metrics");
    ASSERT_TRUE(body) << body.status().to_string();
    EXPECT_EQ(prometheus_sample(*body, "weft_agent_campaigns_rate_capped_total"), i == 1 ? 1 : 0) << i;
  }
}

TEST_F(AgentService, ABrokenFileOnSighupKeepsTheRunningConfiguration) {
  for (int i = 0; i < kAgents; ++i) {
    write_config(i);
    start_agent(i);
  }
  write("original-secret", slurp(path("secret")));
  ::chmod(path("original-secret").c_str(), 0600);
  write("agent0.toml", "udp-port = \n");
  write("secret", "weft-loopback-secret-never-applied\n");  // the file is refused before the secret is read
  agents_[0]->signal(SIGHUP);
  ASSERT_TRUE(wait_until([&] { return log(0).find("the running configuration stays") != std::string::npos; }, 10000))
      << log(0);
  EXPECT_NE(log(0).find("[error] reload: config file " + path("agent0.toml")), std::string::npos) << log(0);
  EXPECT_EQ(log(0).find("applied"), std::string::npos) << log(0);
  // Agent 0 kept its secret (and agent 1 was not told to reload).
  const Probe p = probe("--ports 8", "original-secret");
  EXPECT_TRUE(p.ok()) << p.err;
}

TEST_F(AgentService, SighupChangesTheLogLevel) {
  for (int i = 0; i < kAgents; ++i) {
    write_config(i);
    start_agent(i);
  }
  ASSERT_TRUE(probe("--ports 4").ok());
  EXPECT_EQ(count(log(0), "sweep to 1 hosts x 4 ports started"), 1u) << log(0);
  write_config(0, "log-level = \"warn\"\n");
  agents_[0]->signal(SIGHUP);
  ASSERT_TRUE(wait_until([&] { return log(0).find("log level (warn) applied") != std::string::npos; }, 10000))
      << log(0);
  ASSERT_TRUE(probe("--ports 4").ok());
  EXPECT_EQ(count(log(0), "ports started"), 1u) << log(0);
  EXPECT_EQ(count(log(1), "ports started"), 2u) << log(1);
}

TEST_F(AgentService, SigtermDuringACampaignLetsItCompleteAndExitsZero) {
  for (int i = 0; i < kAgents; ++i) {
    write_config(i);
    start_agent(i);
  }
  // 600 ports at 500 probes/s: a sweep of about 1.2 s from each host.
  auto campaign = start_probe("--ports 600 --rate 500");
  ASSERT_TRUE(wait_until([&] { return log(0).find("ports started") != std::string::npos; }, 10000)) << log(0);
  agents_[0]->signal(SIGTERM);
  ASSERT_TRUE(wait_until([&] { return log(0).find("SIGTERM: draining") != std::string::npos; }, 5000)) << log(0);
  EXPECT_TRUE(wait_until([&] { return control_port_refuses(ip(0), control_port_[0]); }, 2000))
      << "a draining agent still accepts control connections";
  const int agent_status = agents_[0]->wait(20000);
  const int probe_status = campaign->wait(20000);
  EXPECT_TRUE(exited_zero(agent_status)) << agent_status << "\n" << log(0);
  EXPECT_TRUE(exited_zero(probe_status)) << slurp(path("probe1.err"));
  EXPECT_NE(slurp(path("probe1.out")).find("1200 5-tuples (1200 answered)"), std::string::npos)
      << slurp(path("probe1.out"));
  EXPECT_NE(log(0).find("sweep done: 600 probes sent"), std::string::npos) << log(0);
}

TEST_F(AgentService, PastTheDrainTimeoutTheSweepIsCancelledAndTheAgentExitsZero) {
  for (int i = 0; i < kAgents; ++i) {
    write_config(i, "drain-timeout = 0.3\n");
    start_agent(i);
  }
  // 2000 ports at 100 probes/s: 20 s, far past the drain timeout.
  auto campaign = start_probe("--ports 2000 --rate 100");
  ASSERT_TRUE(wait_until([&] { return log(0).find("ports started") != std::string::npos; }, 10000)) << log(0);
  const auto t0 = std::chrono::steady_clock::now();
  agents_[0]->signal(SIGTERM);
  const int status = agents_[0]->wait(10000);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(exited_zero(status)) << status << "\n" << log(0);
  EXPECT_GE(ms, 300);
  EXPECT_LT(ms, 5000);
  EXPECT_NE(log(0).find("drain: 300 ms passed with some sweeps running and 1 sessions open; cancelling"),
            std::string::npos)
      << log(0);
  EXPECT_NE(log(0).find("sweep cancelled"), std::string::npos) << log(0);
}

TEST_F(AgentService, ASecondSigtermStopsAtOnce) {
  for (int i = 0; i < kAgents; ++i) {
    write_config(i);  // drain timeout 30 s
    start_agent(i);
  }
  auto campaign = start_probe("--ports 2000 --rate 100");
  ASSERT_TRUE(wait_until([&] { return log(0).find("ports started") != std::string::npos; }, 10000)) << log(0);
  agents_[0]->signal(SIGTERM);
  ASSERT_TRUE(wait_until([&] { return log(0).find("SIGTERM: draining") != std::string::npos; }, 5000)) << log(0);
  const auto t0 = std::chrono::steady_clock::now();
  agents_[0]->signal(SIGTERM);
  const int status = agents_[0]->wait(10000);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(exited_zero(status)) << status << "\n" << log(0);
  EXPECT_LT(ms, 3000);
  EXPECT_NE(log(0).find("SIGTERM while draining: stopping now"), std::string::npos) << log(0);
}

// systemd names the stream it connects stderr to in $JOURNAL_STREAM
// (systemd.exec(5)); the agent then starts each line with its syslog priority.
TEST_F(AgentService, UnderSystemdEveryLineCarriesItsSyslogPriority) {
  write_config(0);
  write("agent0.log", "");  // the child reopens it for writing: same inode
  struct stat st{};
  ASSERT_EQ(::stat(path("agent0.log").c_str(), &st), 0);
  ::setenv("JOURNAL_STREAM", fmt::format("{}:{}", st.st_dev, st.st_ino).c_str(), 1);
  start_agent(0);
  ::unsetenv("JOURNAL_STREAM");
  agents_[0]->signal(SIGTERM);
  EXPECT_TRUE(exited_zero(agents_[0]->wait(10000)));
  const std::string l = log(0);
  EXPECT_NE(l.find("<6>metrics on http://127.0.0.1:"), std::string::npos) << l;
  EXPECT_NE(l.find("\n<6>SIGTERM: draining"), std::string::npos) << l;
  EXPECT_NE(l.find("\n<6>stopped\n"), std::string::npos) << l;
  EXPECT_EQ(l.find(" [info] "), std::string::npos) << l;
}

}  // namespace
}  // namespace weft::test
