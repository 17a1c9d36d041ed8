// Send rate of the DPDK backend against the kernel UDP backend, in one run,
// from one host's veth of a netns fabric to a reflector on the same leaf,
// both measured in one run on the same veth. Only send() is timed; each batch's
// answers are awaited before the next, and a rate counts only if the probes
// arrived (>= 99% answered, under the campaign's key, sequences exact).
// Skips, saying why, without root or without DPDK.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "netns_fabric.h"
#include "weft/probe/backend.h"
#include "weft/probe/reflector.h"

namespace weft::test {
namespace {

void enter(const std::string& ns) {
  const Status st = enter_netns(ns);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
}

struct Rate {
  double probes_per_s = 0;
  size_t sent = 0, answered = 0;
};

// Sends `total` probes from 64 ports in batches, timing send() alone.
void measure(const char* backend, uint32_t run, const probe::MacKey& key, uint32_t src, uint32_t dst, size_t total,
             Rate* out) {
  probe::SenderConfig sc;
  sc.local_ip = src;
  sc.run = run;
  sc.key = key;
  auto be = probe::make_sender(backend, sc);
  ASSERT_TRUE(be) << be.status().to_string();
  probe::SenderBackend& tx = **be;
  constexpr uint16_t kFirst = 43000, kPorts = 64;
  ASSERT_TRUE(tx.open_ports(kFirst, kPorts).is_ok());
  // One probe per port per batch, then wait for the batch's answers (up to
  // 50 ms): a veth has no queue, and a burst larger than the receiving CPU's
  // backlog (net.core.netdev_max_backlog, 1000) would be dropped there.
  constexpr size_t kBatch = kPorts;
  std::vector<probe::ProbeSend> batch(kBatch);
  std::vector<probe::ProbeAnswer> got;
  std::set<uint32_t> answered;
  std::chrono::nanoseconds sending{0};
  uint32_t seq = 0;
  for (size_t done = 0; done < total; done += kBatch) {
    for (auto& p : batch) p = {dst, static_cast<uint16_t>(kFirst + seq % kPorts), seq}, ++seq;
    const auto t0 = std::chrono::steady_clock::now();
    const Status sent = tx.send(batch);
    ASSERT_TRUE(sent.is_ok()) << backend << ": " << sent.to_string();
    sending += std::chrono::steady_clock::now() - t0;
    for (int i = 0; i < 25 && answered.size() < seq; ++i) {
      got.clear();
      ASSERT_TRUE(tx.poll(2, got).is_ok());
      for (const auto& a : got) answered.insert(a.sequence);
    }
  }
  for (int i = 0; i < 50 && answered.size() < seq; ++i) {
    got.clear();
    ASSERT_TRUE(tx.poll(20, got).is_ok());
    for (const auto& a : got) answered.insert(a.sequence);
  }
  out->sent = tx.stats().sent;
  out->answered = answered.size();
  out->probes_per_s = static_cast<double>(out->sent) / std::chrono::duration<double>(sending).count();
  for (const auto& [why, n] : tx.stats().rejected_by_name()) ADD_FAILURE() << backend << ": " << n << " rejected: " << why;
  EXPECT_TRUE(answered.empty() || *answered.rbegin() < seq) << backend << ": an answer to a probe never sent";
}

TEST(ProbeRateTest, DpdkAgainstKernelSocketsOnOneVeth) {
  WEFT_SKIP_UNLESS_NETNS();
  const Status dpdk = probe::dpdk_available();
  if (!dpdk.is_ok()) GTEST_SKIP() << dpdk.message();
  auto fabric = NetnsFabric::create(FabricOptions::clos(1, 1, 2));
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  const FabricHost& src = f.host("h1-1");
  const FabricHost& dst = f.host("h1-2");
  const probe::MacKey key = probe::MacKey::from_string("rate test key");
  probe::KeyRing keys;
  keys.set(1, key);
  keys.set(2, key);
  std::unique_ptr<probe::Reflector> reflector;
  std::thread([&] {
    enter(dst.ns);
    probe::ReflectorConfig rc;
    rc.bind_ip = ipv4_or_zero(dst.ip);
    reflector = std::make_unique<probe::Reflector>(keys, rc);
    const Status st = reflector->start();
    EXPECT_TRUE(st.is_ok()) << st.to_string();
  }).join();
  ASSERT_TRUE(reflector);

  constexpr size_t kTotal = 20480;
  Rate sockets, dpdk_rate;
  std::thread([&] {
    enter(src.ns);
    measure("udp", 1, key, ipv4_or_zero(src.ip), ipv4_or_zero(dst.ip), kTotal, &sockets);
    measure("dpdk", 2, key, ipv4_or_zero(src.ip), ipv4_or_zero(dst.ip), kTotal, &dpdk_rate);
  }).join();
  reflector->stop();
  for (const Rate* r : {&sockets, &dpdk_rate}) {
    EXPECT_EQ(r->sent, kTotal);
    EXPECT_GE(r->answered, kTotal * 99 / 100) << "answered " << r->answered << " of " << kTotal;
  }
  ASSERT_GT(sockets.probes_per_s, 0);
  std::printf("send rate on %s's veth, %zu probes from 64 ports: kernel UDP sockets %.0f probes/s (%zu answered), "
              "DPDK af_packet %.0f probes/s (%zu answered); DPDK / sockets = %.2f\n",
              src.name.c_str(), kTotal, sockets.probes_per_s, sockets.answered, dpdk_rate.probes_per_s,
              dpdk_rate.answered, dpdk_rate.probes_per_s / sockets.probes_per_s);
  EXPECT_EQ(reflector->stats().rejected_total(), 0u);
}

}  // namespace
}  // namespace weft::test
