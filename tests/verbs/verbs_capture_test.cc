// The planned source port is what a connection's QP puts on the wire:
// capture RoCE v2 packets (UDP dport 4791) with libpcap on the net device
// under the verbs device, and check every packet of every QP, in both
// directions (data from the requester, ACKs from the responder), against the
// planned port. (verbs_transport_test checks the same through the
// communicator and a route plan.)
#include <chrono>
#include <map>
#include <thread>

#include "roce_capture.h"
#include "verbs_env.h"

namespace weft::verbs::testing {
namespace {

TEST(SourcePorts, EveryQpCarriesItsPlannedPortInBothDirections) {
  WEFT_REQUIRE_VERBS_ENV(env);
  // Awkward plans on purpose: the lowest port (flow label 0x4001, not 0:
  // source_port.h), the next, the highest, and ports in between; each side
  // of a connection has its own.
  const std::vector<std::uint32_t> plan_a = {49152, 55555, 65535};
  const std::vector<std::uint32_t> plan_b = {61234, 49153, 50001};
  ConnectionConfig base;
  base.queue_depth = 4;
  auto p = connect_pair(env, plan_a, plan_b, base);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  const std::string netdev = netdev_of(p->a->device());

  RoceCapture cap;
  Status started = cap.start(netdev);
  ASSERT_TRUE(started.is_ok()) << started.message();

  // Messages in both directions on every connection, several packets each.
  const std::size_t n = 3 * 4096 + 77;
  for (std::size_t i = 0; i < plan_a.size(); ++i) {
    auto ab = pattern(n, static_cast<std::uint32_t>(i)), ba = pattern(n, static_cast<std::uint32_t>(i + 100));
    std::vector<std::uint8_t> at_a(n), at_b(n);
    auto mab = p->a->register_buffer(ab.data(), n), maa = p->a->register_buffer(at_a.data(), n);
    auto mba = p->b->register_buffer(ba.data(), n), mbb = p->b->register_buffer(at_b.data(), n);
    ASSERT_TRUE(mab.is_ok() && maa.is_ok() && mba.is_ok() && mbb.is_ok());
    Status sb;
    std::thread tb([&] {
      sb = p->cb[i]->irecv(at_b.data(), n, *mbb).status();
      if (sb.is_ok()) sb = p->cb[i]->isend(ba.data(), n, *mba).status();
      if (sb.is_ok()) sb = p->b->wait_all(*p->cb[i]);
    });
    Status sa = p->ca[i]->irecv(at_a.data(), n, *maa).status();
    if (sa.is_ok()) sa = p->ca[i]->isend(ab.data(), n, *mab).status();
    if (sa.is_ok()) sa = p->a->wait_all(*p->ca[i]);
    tb.join();
    ASSERT_TRUE(sa.is_ok()) << sa.message();
    ASSERT_TRUE(sb.is_ok()) << sb.message();
    ASSERT_EQ(at_b, ab);
    ASSERT_EQ(at_a, ba);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the last ACKs
  const std::vector<RocePacket> seen = cap.stop();

  // A packet addressed to QP q was sent by q's peer: the expected port is the
  // peer's plan. QP numbers are per device, so the key is (destination IP, QPN).
  const std::string ip_a = p->a->device().gid().ipv4(), ip_b = p->b->device().gid().ipv4();
  std::map<std::pair<std::string, std::uint32_t>, std::pair<std::uint32_t, std::string>> expect;  // -> (sport, sender)
  for (std::size_t i = 0; i < plan_a.size(); ++i) {
    expect[{ip_b, p->cb[i]->qpn()}] = {plan_a[i], "a" + std::to_string(i)};
    expect[{ip_a, p->ca[i]->qpn()}] = {plan_b[i], "b" + std::to_string(i)};
  }
  std::map<std::string, int> packets_by_sender;
  int unknown = 0;
  for (const RocePacket& s : seen) {
    auto it = expect.find({s.dst_ip, s.dest_qpn});
    if (it == expect.end()) {
      ++unknown;
      continue;
    }
    EXPECT_EQ(s.sport, it->second.first) << "packet from " << it->second.second << " to QP " << s.dest_qpn;
    ++packets_by_sender[it->second.second];
  }
  EXPECT_EQ(unknown, 0) << "packets to QPs outside this test";
  for (auto& [key, want] : expect) {
    EXPECT_GT(packets_by_sender[want.second], 0) << want.second << " (port " << want.first << ") sent nothing";
    std::printf("%s -> QP %#x: %d packets checked against planned UDP source port %u\n", want.second.c_str(),
                static_cast<unsigned>(key.second), packets_by_sender[want.second], want.first);
  }
}

}  // namespace
}  // namespace weft::verbs::testing
