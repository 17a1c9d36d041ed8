// An attacker on a netns spine-leaf fabric replays captured probes while a
// legitimate campaign runs: a tap on the sender's link copies every request
// it sends (AF_PACKET, packet(7)); an attacker host on another leaf sends each
// copy again through a raw socket (raw(7), IP_HDRINCL) from the sender's own
// address, from its own and other spoofed addresses, and to another host.
// Every copy is refused and counted under its reason, the reflectors answer
// exactly the requests the sender sent, and the campaign's observations are
// the fabric's own routes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "netns_fabric.h"
#include "request_tap.h"
#include "weft/probe/campaign.h"
#include "weft/probe/fd.h"
#include "weft/probe/reflector.h"

namespace weft::test {
namespace {

using Clock = std::chrono::steady_clock;

void enter(const std::string& ns) {
  const Status st = enter_netns(ns);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
}

struct Captured {
  std::vector<uint8_t> ip;  // IPv4 header onwards
  Clock::time_point at;
};

struct AttackCounts {
  uint64_t own_source = 0, spoofed = 0, readdressed = 0;
};

TEST(ProbeSpoofNetnsTest, CapturedProbesSentAgainFromSpoofedSourcesAreRefusedByReasonWhileTheCampaignCompletes) {
  WEFT_SKIP_UNLESS_NETNS();
  auto fabric = NetnsFabric::create(FabricOptions::clos(2, 2, 2));
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  const FabricHost& sender = f.host("h1-1");
  const FabricHost& attacker = f.host("h2-2");
  const uint32_t run = 0x5900f001;
  const probe::MacKey key = probe::MacKey::from_string("spoof test key");
  probe::KeyRing keys;
  keys.set(run, key);

  std::vector<std::unique_ptr<probe::Reflector>> reflectors;
  for (const FabricHost& h : f.hosts()) {
    std::thread([&] {
      enter(h.ns);
      probe::ReflectorConfig rc;
      rc.bind_ip = ipv4_or_zero(h.ip);
      reflectors.push_back(std::make_unique<probe::Reflector>(keys, rc));
      const Status st = reflectors.back()->start();
      EXPECT_TRUE(st.is_ok()) << h.name << ": " << st.to_string();
    }).join();
  }

  // The tap: every request leaving the sender, with the time it was seen.
  std::mutex mu;
  std::deque<Captured> queue;
  uint64_t captured = 0;
  std::atomic<bool> campaign_done{false}, tap_ready{false};
  std::thread tap([&] {
    const Status st = tap_outgoing_udp(sender.ns, 4791, campaign_done, tap_ready, [&](std::vector<uint8_t> pkt) {
      std::lock_guard lock(mu);
      queue.push_back({std::move(pkt), Clock::now()});
      ++captured;
    });
    EXPECT_TRUE(st.is_ok()) << st.to_string();
  });

  // The attacker: each copy, 2 ms after it was captured (after the original
  // arrived: a copy that overtook its original would be the original),
  // kRounds times over: from the sender's address, from the attacker's, from
  // another host's, and to another host, back to back (~50 copies per request:
  // 50,000 packets/s against the campaign's 1,000). UDP checksum 0: none
  // (RFC 768), so the spoofed addresses need no new one; the kernel fills the
  // IP checksum.
  constexpr int kRounds = 10;
  AttackCounts sent;
  std::thread attack([&] {
    enter(attacker.ns);
    probe::UniqueFd raw(::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW));
    ASSERT_TRUE(raw) << "raw socket: " << std::strerror(errno);
    const uint32_t other = ipv4_or_zero(f.host("h2-1").ip), leaf_mate = ipv4_or_zero(f.host("h1-2").ip);
    auto send = [&](const std::vector<uint8_t>& pkt, uint64_t* count) {
      sockaddr_in to{};
      to.sin_family = AF_INET;
      std::memcpy(&to.sin_addr.s_addr, pkt.data() + 16, 4);
      if (::sendto(raw.get(), pkt.data(), pkt.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) ==
          static_cast<ssize_t>(pkt.size())) {
        ++*count;
      }
    };
    for (;;) {
      std::optional<Captured> c;
      {
        std::lock_guard lock(mu);
        if (!queue.empty() && (campaign_done || Clock::now() - queue.front().at > std::chrono::milliseconds(2))) {
          c = std::move(queue.front());
          queue.pop_front();
        } else if (queue.empty() && campaign_done) {
          break;
        }
      }
      if (!c) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        continue;
      }
      std::vector<uint8_t> pkt = c->ip;
      const size_t ihl = (pkt[0] & 0x0fu) * 4;
      pkt[ihl + 6] = pkt[ihl + 7] = 0;  // no UDP checksum
      pkt[10] = pkt[11] = 0;            // IP checksum: the kernel's
      uint32_t dst;
      std::memcpy(&dst, pkt.data() + 16, 4);
      dst = ntohl(dst);
      std::vector<std::vector<uint8_t>> spoofed;
      for (uint32_t src : {ipv4_or_zero(attacker.ip), other, leaf_mate}) {
        // A host drops a packet from its own address that came from outside
        // (a martian, ip(7)); such a copy would not reach the reflector.
        if (src == dst && src != ipv4_or_zero(attacker.ip)) continue;
        spoofed.push_back(pkt);
        put_ipv4(spoofed.back(), 12, src);
      }
      std::vector<uint8_t> moved = pkt;
      put_ipv4(moved, 16, dst == other ? leaf_mate : other);
      for (int round = 0; round < kRounds; ++round) {
        send(pkt, &sent.own_source);
        for (const auto& p : spoofed) send(p, &sent.spoofed);
        send(moved, &sent.readdressed);
      }
    }
  });

  // The legitimate campaign from the tapped sender to every other host.
  constexpr int kPorts = 150;
  probe::CampaignOutcome outcome;
  std::vector<probe::FlowResult> results;
  std::thread legit([&] {
    enter(sender.ns);
    while (!tap_ready) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    probe::SenderConfig sc;
    sc.local_ip = ipv4_or_zero(sender.ip);
    sc.run = run;
    sc.key = key;
    auto be = probe::make_sender("udp", sc);
    ASSERT_TRUE(be) << be.status().to_string();
    probe::CampaignPlan plan;
    for (const auto& h : f.hosts())
      if (h.ip != sender.ip) plan.targets.push_back(ipv4_or_zero(h.ip));
    plan.sport_first = 42000;
    plan.sport_count = kPorts;
    plan.probes_per_port = 2;
    plan.rate_pps = 1000;  // ~1 s of campaign for the attack to run against
    auto out = probe::run_campaign(**be, plan, [&](const probe::FlowResult& r) { results.push_back(r); });
    ASSERT_TRUE(out) << out.status().to_string();
    outcome = *out;
  });
  legit.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  campaign_done = true;
  tap.join();
  attack.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the last copies reach the reflectors

  // The campaign: complete, nothing refused at the sender (no answer to a
  // copy reached it), every observation the fabric's own route.
  const size_t n_targets = f.hosts().size() - 1;
  EXPECT_EQ(outcome.stats.timed_out, 0u);
  EXPECT_EQ(outcome.stats.rejected_total(), 0u);
  ASSERT_EQ(results.size(), n_targets * kPorts);
  std::vector<FiveTuple> tuples;
  for (const auto& r : results) tuples.push_back({sender.ip, ipv4_str(r.dst_ip), 17, r.sport, 4791});
  auto truth = f.ground_truth(tuples);
  ASSERT_TRUE(truth) << truth.status().to_string();
  size_t match = 0;
  for (size_t i = 0; i < results.size(); ++i) match += results[i].spine == (*truth)[i] && results[i].answered == 2;
  EXPECT_EQ(match, results.size()) << "every observation is the fabric's route, from the genuine probes only";

  // The reflectors: they answered exactly the requests the sender sent, and
  // refused every copy under its reason.
  probe::ProbeStats refl;
  for (const auto& r : reflectors) refl += r->stats();
  EXPECT_EQ(captured, outcome.stats.sent) << "the tap saw every request";
  EXPECT_EQ(refl.answered, outcome.stats.sent) << "no copy was answered";
  EXPECT_GT(sent.own_source, 0u);
  EXPECT_EQ(sent.own_source, kRounds * captured);
  EXPECT_GE(sent.spoofed, 2 * kRounds * captured);
  EXPECT_EQ(sent.readdressed, kRounds * captured);
  EXPECT_EQ(refl.rejected_for(probe::Reject::kReplayed) + refl.rejected_for(probe::Reject::kBehindWindow),
            sent.own_source);
  EXPECT_EQ(refl.rejected_for(probe::Reject::kBadSource), sent.spoofed);
  EXPECT_EQ(refl.rejected_for(probe::Reject::kBadDestination), sent.readdressed);
  EXPECT_EQ(refl.rejected_total(), sent.own_source + sent.spoofed + sent.readdressed);
  for (const auto& [why, count] : refl.rejected_by_name()) std::printf("reflectors refused %s: %ld\n", why.c_str(), count);
  for (auto& r : reflectors) r->stop();
}

}  // namespace
}  // namespace weft::test
