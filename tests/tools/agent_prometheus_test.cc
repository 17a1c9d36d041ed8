// The metrics endpoint as Prometheus sees it: `promtool check metrics` accepts
// what two agents serve after a campaign, and a real Prometheus server (Debian's
// `prometheus`, started here on loopback with a temporary config and storage,
// killed by its PID at the end) scrapes both agents during the campaign; its
// HTTP API returns the probe counters each agent serves, and their sum is what
// the controller counted from the agents' "done" frames.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loopback_agents.h"

namespace weft::test {
namespace {

constexpr const char* kPrometheus = "/usr/bin/prometheus";
constexpr const char* kPromtool = "/usr/bin/promtool";

#define SKIP_UNLESS_INSTALLED(bin)                                                                  \
  if (::access(bin, X_OK) != 0) GTEST_SKIP() << bin << " is not installed (apt-get install prometheus; " \
                                                      "scripts/install-deps.sh does)"

// A Prometheus query's value per agent name (label "name" of weft_agent_info is
// on no other series: match by the instance's port instead).
Result<std::map<std::string, double>> query(uint16_t port, const std::string& promql) {
  std::string q;
  for (unsigned char c : promql) q += std::isalnum(c) ? std::string(1, static_cast<char>(c)) : fmt::format("%{:02X}", c);
  WEFT_ASSIGN_OR_RETURN(std::string body, http_get(port, "/api/v1/query?query=" + q));
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return unavailable("query failed: " + body);
  std::map<std::string, double> out;
  for (const auto& r : j["data"]["result"]) {
    out[r["metric"].value("instance", "")] = std::stod(r["value"][1].get<std::string>());
  }
  return out;
}

using AgentPrometheus = LoopbackAgents;

TEST_F(AgentPrometheus, PromtoolAcceptsTheEndpointAfterACampaign) {
  SKIP_UNLESS_INSTALLED(kPromtool);
  for (int i = 0; i < kAgents; ++i) {
    write_config(i);
    start_agent(i);
  }
  const Probe p = probe("--ports 40 --probes 2");
  ASSERT_TRUE(p.ok()) << p.err;
  for (int i = 0; i < kAgents; ++i) {
    auto body = http_get(metrics_port_[i], "/metrics");
    ASSERT_TRUE(body) << body.status().to_string();
    ASSERT_NE(body->find("weft_agent_path_rtt_seconds_bucket{spine=\"0\""), std::string::npos) << *body;
    write("metrics.txt", *body);
    const std::string cmd = fmt::format("{} check metrics < {} > {} 2>&1", kPromtool, path("metrics.txt"),
                                        path("promtool.out"));
    const int st = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << slurp(path("promtool.out"));
    EXPECT_EQ(slurp(path("promtool.out")), "");
  }
}

TEST_F(AgentPrometheus, AScrapingServerReturnsTheCountersTheAgentsServe) {
  SKIP_UNLESS_INSTALLED(kPrometheus);
  for (int i = 0; i < kAgents; ++i) {
    write_config(i);
    start_agent(i);
  }
  const uint16_t prom_port = free_port(SOCK_STREAM);
  write("prometheus.yml", fmt::format("global:\n  scrape_interval: 200ms\n  scrape_timeout: 200ms\n"
                                      "scrape_configs:\n  - job_name: weft\n    static_configs:\n"
                                      "      - targets: ['127.0.0.1:{}', '127.0.0.1:{}']\n",
                                      metrics_port_[0], metrics_port_[1]));
  Child prom({kPrometheus, "--config.file=" + path("prometheus.yml"), "--storage.tsdb.path=" + path("tsdb"),
              fmt::format("--web.listen-address=127.0.0.1:{}", prom_port), "--log.level=warn"},
             path("prometheus.out"), path("prometheus.err"));
  ASSERT_TRUE(wait_until([&] { return static_cast<bool>(http_get(prom_port, "/-/ready")); }, 30000)) << slurp(path("prometheus.err"));
  // Both targets scraped before the campaign starts.
  ASSERT_TRUE(wait_until([&] { auto r = query(prom_port, "up == 1"); return r && r->size() == 2; }, 20000));

  // 600 ports x 2 probes at 600 probes/s: about 2 s per host, many scrapes.
  const Probe p = probe("--ports 600 --probes 2 --rate 600");
  ASSERT_TRUE(p.ok()) << p.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(p.out, m, std::regex(R"(probes: (\d+) sent, (\d+) answered, (\d+) timed out, (\d+) retried)")))
      << p.out;
  const double controller_sent = std::stod(m[1]), controller_answered = std::stod(m[2]);
  EXPECT_EQ(controller_sent, 2400);

  std::map<std::string, double> served_sent, served_answered, served_timed_out, served_peer_sent;
  for (int i = 0; i < kAgents; ++i) {
    auto body = http_get(metrics_port_[i], "/metrics");
    ASSERT_TRUE(body) << body.status().to_string();
    const std::string instance = fmt::format("127.0.0.1:{}", metrics_port_[i]);
    served_sent[instance] = prometheus_sample(*body, "weft_agent_probes_sent_total");
    served_answered[instance] = prometheus_sample(*body, "weft_agent_probes_answered_total");
    served_timed_out[instance] = prometheus_sample(*body, "weft_agent_probes_timed_out_total");
    served_peer_sent[instance] =
        prometheus_sample(*body, fmt::format("weft_agent_peer_probes_sent_total{{peer=\"{}\"}}", ip(1 - i)));
  }
  double sum_sent = 0, sum_answered = 0;
  for (const auto& [inst, v] : served_sent) sum_sent += v;
  for (const auto& [inst, v] : served_answered) sum_answered += v;
  EXPECT_EQ(sum_sent, controller_sent);
  EXPECT_EQ(sum_answered, controller_answered);

  // Prometheus catches up within a few scrapes.
  std::map<std::string, double> sent, answered, timed_out, peer_sent, running;
  ASSERT_TRUE(wait_until([&] {
    auto r = query(prom_port, "weft_agent_probes_sent_total");
    if (r) sent = *r;
    return sent == served_sent;
  }, 15000)) << "Prometheus has " << nlohmann::json(sent).dump() << ", the agents serve " << nlohmann::json(served_sent).dump();
  auto a = query(prom_port, "weft_agent_probes_answered_total");
  auto t = query(prom_port, "weft_agent_probes_timed_out_total");
  auto ps = query(prom_port, "sum by (instance) (weft_agent_peer_probes_sent_total)");
  ASSERT_TRUE(a && t && ps);
  EXPECT_EQ(*a, served_answered);
  EXPECT_EQ(*t, served_timed_out);
  EXPECT_EQ(*ps, served_peer_sent);
  fmt::print("controller: {} sent, {} answered; agents serve sent {}, answered {}; Prometheus has sent {}, answered {}\n",
             controller_sent, controller_answered, nlohmann::json(served_sent).dump(),
             nlohmann::json(served_answered).dump(), nlohmann::json(sent).dump(), nlohmann::json(*a).dump());
  // Scraped during the campaign: each agent was seen with its sweep running.
  auto r = query(prom_port, "max_over_time(weft_agent_campaigns_running[1m])");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 2u);
  for (const auto& [inst, v] : *r) EXPECT_EQ(v, 1) << inst << " was never scraped while its sweep ran";

  prom.signal(SIGTERM);
  EXPECT_NE(prom.wait(10000), -1);
}

}  // namespace
}  // namespace weft::test
