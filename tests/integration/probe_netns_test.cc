// The probe data plane on a real (netns) spine-leaf fabric, in one process:
// reflectors and senders run on threads that entered the hosts' namespaces
// (setns(2) is per thread). Every observation is compared with the fabric's own
// answer (the source leaf's FIB), for UDP-DSCP, UDP-TTL and TCP-SYN probes, and
// UDP probes sent through DPDK (DSCP and TTL; skipped, saying why, when weft
// was built without DPDK or its EAL cannot start).
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "netns_fabric.h"
#include "weft/probe/campaign.h"
#include "weft/probe/reflector.h"

namespace weft::test {
namespace {

using probe::FlowResult;

// Runs fn on a thread inside namespace ns.
std::thread in_netns(const std::string& ns, std::function<void()> fn) {
  return std::thread([ns, fn = std::move(fn)] {
    const Status st = enter_netns(ns);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    fn();
  });
}

struct Case {
  const char* backend;
  probe::Method method;
  int protocol;
  uint16_t dport;
};

class ProbeNetnsTest : public ::testing::TestWithParam<Case> {};

TEST_P(ProbeNetnsTest, EveryObservationMatchesTheFabricsOwnRoute) {
  WEFT_SKIP_UNLESS_NETNS();
  const Case c = GetParam();
  if (std::string_view(c.backend) == "dpdk") {
    const Status dpdk = probe::dpdk_available();
    if (!dpdk.is_ok()) GTEST_SKIP() << dpdk.message();
  }
  auto fabric = NetnsFabric::create(FabricOptions::clos(3, 3, 2));
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  const uint32_t run = 0x5eed0001;
  const probe::MacKey key = probe::MacKey::from_string("netns test key");
  probe::KeyRing keys;
  keys.set(run, key);

  std::vector<std::unique_ptr<probe::Reflector>> reflectors(f.hosts().size());
  {
    std::vector<std::thread> ts;
    for (size_t i = 0; i < f.hosts().size(); ++i) {
      ts.push_back(in_netns(f.hosts()[i].ns, [&, i] {
        probe::ReflectorConfig rc;
        rc.bind_ip = ipv4_or_zero(f.hosts()[i].ip);
        rc.udp_port = c.protocol == 17 ? c.dport : 4791;
        rc.tcp_port = c.protocol == 6 ? c.dport : 0;
        reflectors[i] = std::make_unique<probe::Reflector>(keys, rc);
        const Status st = reflectors[i]->start();
        EXPECT_TRUE(st.is_ok()) << st.to_string();
      }));
    }
    for (auto& t : ts) t.join();
  }

  constexpr int kPorts = 13;
  std::mutex mu;
  std::vector<FiveTuple> tuples;
  std::vector<FlowResult> results;
  std::vector<std::thread> ts;
  for (const auto& src : f.hosts()) {
    ts.push_back(in_netns(src.ns, [&, src] {
      probe::SenderConfig sc;
      sc.method = c.method;
      sc.local_ip = ipv4_or_zero(src.ip);
      sc.dport = c.dport;
      sc.run = run;
      sc.key = key;
      auto be = probe::make_sender(c.backend, sc);
      ASSERT_TRUE(be) << be.status().to_string();
      probe::CampaignPlan plan;
      for (const auto& dst : f.hosts())
        if (dst.ip != src.ip) plan.targets.push_back(ipv4_or_zero(dst.ip));
      plan.sport_first = 41000;
      plan.sport_count = kPorts;
      plan.probes_per_port = 2;
      auto out = probe::run_campaign(**be, plan, [&](const FlowResult& r) {
        std::lock_guard lock(mu);
        tuples.push_back({src.ip, ipv4_str(r.dst_ip), c.protocol, r.sport, c.dport});
        results.push_back(r);
      });
      ASSERT_TRUE(out) << out.status().to_string();
      EXPECT_EQ(out->stats.timed_out, 0u) << src.name;
      EXPECT_EQ(out->stats.rejected_total(), 0u) << src.name;
    }));
  }
  for (auto& t : ts) t.join();
  const size_t n = f.hosts().size();
  ASSERT_EQ(results.size(), n * (n - 1) * kPorts);
  auto truth = f.ground_truth(tuples);
  ASSERT_TRUE(truth) << truth.status().to_string();
  size_t match = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const FlowResult& r = results[i];
    EXPECT_FALSE(r.unstable);
    int seen;
    if (c.method == probe::Method::kTtl) {
      // 10.254.0.N is spine N's loopback (scripts/netns-fabric.sh); no hop = same leaf.
      seen = r.hop_ip == 0 ? (r.answered ? 0 : -1) : static_cast<int>(r.hop_ip - ipv4_or_zero("10.254.0.0"));
    } else {
      seen = r.spine;
    }
    if (seen == (*truth)[i]) ++match;
    else ADD_FAILURE() << tuples[i].src_ip << " -> " << tuples[i].dst_ip << " sport " << r.sport << ": probe saw "
                       << seen << ", fabric routes via " << (*truth)[i];
  }
  EXPECT_EQ(match, results.size());
  for (auto& r : reflectors) {
    EXPECT_EQ(r->stats().rejected_total(), 0u);
    r->stop();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ProbeNetnsTest,
                         ::testing::Values(Case{"udp", probe::Method::kDscp, 17, 4791},
                                           Case{"udp", probe::Method::kTtl, 17, 4791},
                                           Case{"tcp-syn", probe::Method::kDscp, 6, 5201},
                                           Case{"dpdk", probe::Method::kDscp, 17, 4791},
                                           Case{"dpdk", probe::Method::kTtl, 17, 4791}),
                         [](const auto& p) {
                           const std::string_view b = p.param.backend;
                           return fmt::format("{}_{}", b == "dpdk" ? "dpdk" : p.param.protocol == 6 ? "tcp_syn" : "udp",
                                              probe::method_name(p.param.method));
                         });

}  // namespace
}  // namespace weft::test
