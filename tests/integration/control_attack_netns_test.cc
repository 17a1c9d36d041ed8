// An attacker on the control path: a TCP proxy in leaf 2's namespace, to which
// nftables redirects h1-1's connections for h2-1's control port. The real
// controller in h1-1 meets forged, replayed, swapped and cut frames through it,
// one attack per session; each is rejected and counted by reason, no forged
// sweep starts, no forged row is stored. Then, while a second attacker host
// (h1-2) holds 500 idle connections to h2-1's control port and the proxy
// stays on the path passing frames, the controller completes its campaign.
// The agent's rejections are read from its Prometheus endpoint.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "agent_fleet.h"
#include "http_get.h"
#include "loopback.h"
#include "weft/agent/controller.h"

namespace weft::test {
namespace {

using agent::ControlReject;
using agent::testing::Action;
using agent::testing::Tamper;
using agent::testing::Toward;
using nlohmann::json;

struct Step {
  Toward toward;
  const char* trigger;
  Tamper tamper;
  ControlReject reason;
};

TEST(ControlAttackNetnsTest, AnOnPathAttackerIsRejectedCountedAndCannotStopTheCampaign) {
  WEFT_SKIP_UNLESS_NETNS();
  auto fabric = NetnsFabric::create(FabricOptions::clos(2, 2, 2));
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  const std::string dir = fmt::format("/tmp/weft-control-attack-{}", ::getpid());
  constexpr uint16_t kMetricsPort = 9740;  // in each host's own namespace
  auto fleet = AgentFleet::start(f, dir, {"--metrics", fmt::format("127.0.0.1:{}", kMetricsPort)});
  ASSERT_TRUE(fleet) << fleet.status().to_string();
  auto secret = agent::load_secret((*fleet)->secret_path());
  ASSERT_TRUE(secret);
  std::ifstream hf((*fleet)->hosts_path());
  std::stringstream hs;
  hs << hf.rdbuf();
  auto hosts = agent::parse_hosts(hs.str(), "hosts");
  ASSERT_TRUE(hosts);

  // nftables in leaf 2 (a router on every path to h2-1) hands the
  // controller's control connections to h2-1 to the attacker's proxy on the
  // leaf itself.
  const std::string leaf = f.prefix() + "l2";
  auto nft = run_shell("ip netns exec " + leaf + " nft -f -",
                       "table ip mitm {\n  chain pre {\n    type nat hook prerouting priority dstnat;\n"
                       "    ip saddr 10.0.1.1 ip daddr 10.0.2.1 tcp dport 7400 redirect to :7401\n  }\n}\n");
  ASSERT_TRUE(nft) << nft.status().to_string();

  const std::vector<Step> steps = {
      {Toward::kAgent, "announce", Tamper::kForged, ControlReject::kBadTag},
      {Toward::kAgent, "announce", Tamper::kReplay, ControlReject::kReplayed},
      {Toward::kAgent, "campaign", Tamper::kCutMidFrame, ControlReject::kTruncated},
      {Toward::kController, "results", Tamper::kForged, ControlReject::kBadTag},
      {Toward::kController, "results", Tamper::kSwap, ControlReject::kOutOfOrder},
  };
  int session = -1;  // sessions to h2-1 seen by the proxy; session i meets steps[i]
  bool struck = false;
  int strikes = 0;
  std::optional<std::string> held;
  auto hook = [&](Toward d, int index, const std::string& fr) -> Action {
    if (d == Toward::kAgent && index == 0) {
      ++session;
      struck = false;
    }
    if (session < 0 || session >= static_cast<int>(steps.size())) return {{fr}};
    const Step& st = steps[static_cast<size_t>(session)];
    if (held && d == st.toward) {
      Action act{{fr, *held}};
      held.reset();
      return act;
    }
    if (struck || d != st.toward || index < 2) return {{fr}};
    if (agent::testing::frame_json(fr, true).value("type", "") != st.trigger) return {{fr}};
    struck = true;
    ++strikes;
    return agent::testing::tamper(st.tamper, st.toward, fr, held);
  };
  std::unique_ptr<agent::testing::MitmProxy> proxy;
  std::thread([&] {
    ASSERT_TRUE(enter_netns(leaf));
    proxy = std::make_unique<agent::testing::MitmProxy>("10.0.2.1", 7400, hook, "0.0.0.0", 7401);
  }).join();

  constexpr int kIdle = 500;
  int connected = 0;
  std::vector<std::string> errors;
  json status;
  std::string metrics;
  int64_t flows_total = 0, rows_outside = -1;
  std::thread([&] {
    ASSERT_TRUE(enter_netns(f.host("h1-1").ns));
    auto db = db::Database::open((*fleet)->db_path());
    ASSERT_TRUE(db);
    const agent::ProbeRunConfig cfg = agent::testing::quick_campaign();
    for (size_t i = 0; i < steps.size(); ++i) {
      auto r = agent::run_probe(*db, *hosts, *secret, cfg);
      errors.push_back(r ? "completed" : r.status().message());
    }
    // The second attacker, h1-2, connects 500 times to h2-1's control port
    // and sends nothing; the honest run goes through the proxy meanwhile.
    std::vector<int> idle;
    std::thread([&] {
      ASSERT_TRUE(enter_netns(f.host("h1-2").ns));
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(7400);
      ::inet_pton(AF_INET, "10.0.2.1", &to.sin_addr);
      for (int i = 0; i < kIdle; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
          idle.push_back(fd);
        } else {
          ::close(fd);
        }
      }
    }).join();
    auto honest = agent::run_probe(*db, *hosts, *secret, cfg);  // through the proxy, which now passes frames
    for (int fd : idle) ::close(fd);
    connected = static_cast<int>(idle.size());
    ASSERT_TRUE(honest) << honest.status().to_string();
    flows_total = honest->flows_total;
    rows_outside = *db->query_int("SELECT COUNT(*) FROM observations WHERE sport NOT BETWEEN 50000 AND 50007");
    agent::testing::Client admin("10.0.2.1", 7400);
    ASSERT_TRUE(admin.authenticate(*secret, {0x0a000201}));
    admin.send({{"type", "status"}});
    status = admin.read();
  }).join();
  std::thread([&] {
    ASSERT_TRUE(enter_netns(f.host("h2-1").ns));
    auto body = http_get(kMetricsPort, "/metrics");
    ASSERT_TRUE(body) << body.status().to_string();
    metrics = std::move(*body);
  }).join();

  EXPECT_EQ(strikes, static_cast<int>(steps.size()));
  ASSERT_EQ(errors.size(), steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_NE(errors[i], "completed") << "session " << i << " completed through a tampered channel";
    if (steps[i].toward == Toward::kController) {
      EXPECT_NE(errors[i].find(fmt::format("control frame rejected ({})", control_reject_name(steps[i].reason))),
                std::string::npos)
          << errors[i];
    }
  }
  EXPECT_EQ(flows_total, 4 * 3 * 8) << "the honest run completes the campaign";
  EXPECT_EQ(rows_outside, 0) << "a forged observation was stored";
  ASSERT_TRUE(status.is_object());
  const json& cr = status["control_rejected"];
  EXPECT_EQ(cr.value("bad_tag", 0), 1) << cr.dump();
  EXPECT_EQ(cr.value("replayed", 0), 1) << cr.dump();
  EXPECT_EQ(cr.value("truncated", 0), 1) << cr.dump();
  // h2-1 started sweeps only in the sessions whose commands arrived intact: the
  // two attacked on results, and the honest one.
  EXPECT_EQ(status.value("campaigns", 0), 3) << status.dump();
  // The idle connections: h1-2 may hold 8 unauthenticated sessions at a time;
  // each one past that evicted its oldest, and the controller got in anyway.
  EXPECT_EQ(connected, kIdle);
  EXPECT_EQ(cr.value("evicted", 0), kIdle - 8) << cr.dump();
  // The same counts on the agent's Prometheus endpoint.
  const auto rejected = [&](const char* reason) {
    return prometheus_sample(metrics, fmt::format("weft_agent_control_rejected_total{{reason=\"{}\"}}", reason));
  };
  EXPECT_EQ(rejected("bad_tag"), 1) << metrics;
  EXPECT_EQ(rejected("replayed"), 1);
  EXPECT_EQ(rejected("truncated"), 1);
  EXPECT_EQ(rejected("evicted"), kIdle - 8);
  EXPECT_EQ(prometheus_sample(metrics, "weft_agent_campaigns_started_total"), 3);
  proxy.reset();
}

}  // namespace
}  // namespace weft::test
