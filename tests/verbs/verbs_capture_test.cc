// The route plan's source port is what goes on the wire: capture RoCE v2
// packets (UDP dport 4791) with libpcap on the net device under the verbs
// device, and check every packet of every QP, in both directions (data from
// the requester, ACKs from the responder), against the planned port.
#include <pcap/pcap.h>

#include <arpa/inet.h>

#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "verbs_env.h"

namespace weft::verbs::testing {
namespace {

struct Seen {
  std::uint16_t sport;
  std::uint32_t dest_qpn;
  std::uint32_t dst_ip;  // network order
};

// Ethernet / IPv4 / UDP / BTH: the BTH's destination QP is bytes 5..7 of the
// 12-byte base transport header (IBTA vol. 1, 9.2).
bool parse(const std::uint8_t* p, std::size_t n, Seen* out) {
  if (n < 14 + 20 + 8 + 12) return false;
  if (p[12] != 0x08 || p[13] != 0x00) return false;
  const std::uint8_t* ip = p + 14;
  const std::size_t ihl = (ip[0] & 0x0F) * 4u;
  if (ip[9] != 17 || n < 14 + ihl + 8 + 12) return false;
  const std::uint8_t* udp = ip + ihl;
  if ((udp[2] << 8 | udp[3]) != 4791) return false;
  const std::uint8_t* bth = udp + 8;
  out->sport = static_cast<std::uint16_t>(udp[0] << 8 | udp[1]);
  out->dest_qpn = static_cast<std::uint32_t>(bth[5] << 16 | bth[6] << 8 | bth[7]);
  std::memcpy(&out->dst_ip, ip + 16, 4);
  return true;
}

TEST(SourcePorts, EveryQpCarriesItsPlannedPortInBothDirections) {
  WEFT_REQUIRE_VERBS_ENV(env);
  // Awkward plans on purpose: the lowest expressible port, the highest, and
  // ports in between; each side of a connection has its own.
  const std::vector<std::uint32_t> plan_a = {49153, 55555, 65535};
  const std::vector<std::uint32_t> plan_b = {61234, 49999, 50001};
  ConnectionConfig base;
  base.slots = 4;
  base.slot_bytes = 4096;
  auto p = connect_pair(env, plan_a, plan_b, base);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  const std::string netdev = netdev_of(p->a->device());

  char err[PCAP_ERRBUF_SIZE] = {};
  pcap_t* pc = pcap_create(netdev.c_str(), err);
  ASSERT_NE(pc, nullptr) << err;
  std::unique_ptr<pcap_t, void (*)(pcap_t*)> pcap(pc, pcap_close);
  pcap_set_snaplen(pc, 128);
  pcap_set_immediate_mode(pc, 1);
  pcap_set_timeout(pc, 100);
  ASSERT_EQ(pcap_activate(pc), 0) << pcap_geterr(pc);
  bpf_program prog{};
  ASSERT_EQ(pcap_compile(pc, &prog, "udp dst port 4791", 1, PCAP_NETMASK_UNKNOWN), 0) << pcap_geterr(pc);
  ASSERT_EQ(pcap_setfilter(pc, &prog), 0) << pcap_geterr(pc);
  pcap_freecode(&prog);
  ASSERT_EQ(pcap_setnonblock(pc, 1, err), 0) << err;

  // Messages in both directions on every connection, several chunks each.
  std::vector<Seen> seen;
  auto drain = [&] {
    pcap_dispatch(
        pc, -1,
        [](u_char* user, const pcap_pkthdr* h, const u_char* bytes) {
          Seen s{};
          if (parse(bytes, h->caplen, &s)) reinterpret_cast<std::vector<Seen>*>(user)->push_back(s);
        },
        reinterpret_cast<u_char*>(&seen));
  };
  const std::size_t n = 3 * 4096 + 77;
  for (std::size_t i = 0; i < plan_a.size(); ++i) {
    auto ab = pattern(n, static_cast<std::uint32_t>(i)), ba = pattern(n, static_cast<std::uint32_t>(i + 100));
    std::vector<std::uint8_t> at_a(n), at_b(n);
    Status sb;
    std::thread tb([&] {
      sb = p->cb[i]->irecv(at_b.data(), n);
      if (sb.is_ok()) sb = p->cb[i]->isend(ba.data(), n);
      if (sb.is_ok()) sb = p->b->wait_all(*p->cb[i]);
    });
    Status sa = p->ca[i]->irecv(at_a.data(), n);
    if (sa.is_ok()) sa = p->ca[i]->isend(ab.data(), n);
    if (sa.is_ok()) sa = p->a->wait_all(*p->ca[i]);
    tb.join();
    ASSERT_TRUE(sa.is_ok()) << sa.message();
    ASSERT_TRUE(sb.is_ok()) << sb.message();
    ASSERT_EQ(at_b, ab);
    ASSERT_EQ(at_a, ba);
    drain();
  }
  // Stragglers (last ACKs) within half a second.
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    drain();
  }

  // A packet addressed to QP q was sent by q's peer: the expected port is the
  // peer's plan. QP numbers are per device, so the key is (destination IP, QPN).
  auto ip_of = [](const Context& c) {
    in_addr a{};
    inet_pton(AF_INET, c.device().gid().ipv4().c_str(), &a);
    return std::uint64_t{a.s_addr};
  };
  const std::uint64_t ip_a = ip_of(*p->a), ip_b = ip_of(*p->b);
  std::map<std::uint64_t, std::pair<std::uint32_t, std::string>> expect;  // (ip, qpn) -> (sport, sender)
  for (std::size_t i = 0; i < plan_a.size(); ++i) {
    expect[ip_b << 24 | p->cb[i]->qpn()] = {plan_a[i], "a" + std::to_string(i)};
    expect[ip_a << 24 | p->ca[i]->qpn()] = {plan_b[i], "b" + std::to_string(i)};
  }
  std::map<std::string, int> packets_by_sender;
  int unknown = 0;
  for (const Seen& s : seen) {
    auto it = expect.find(std::uint64_t{s.dst_ip} << 24 | s.dest_qpn);
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
                static_cast<unsigned>(key & 0xFFFFFF), packets_by_sender[want.second], want.first);
  }
}

}  // namespace
}  // namespace weft::verbs::testing
