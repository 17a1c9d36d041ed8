// The UDP reflector on loopback (no privilege): it reads each request's
// destination address (IP_PKTINFO) for the MAC-covered 5-tuple, answers from
// that address, and refuses a captured request sent again from its own
// socket, from another port, or to another address, each under its reason.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <span>
#include <thread>
#include <vector>

#include "weft/probe/backend.h"
#include "weft/probe/fd.h"
#include "weft/probe/reflector.h"

namespace weft::probe {
namespace {

constexpr uint32_t kReflectorRun = 0x10cab0c5;
constexpr uint32_t kLo1 = 0x7f000001, kLo2 = 0x7f000002, kLo3 = 0x7f000003;

sockaddr_in addr(uint32_t ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(ip);
  return a;
}

struct Client {
  UniqueFd fd;
  uint16_t port = 0;
  uint32_t ip = 0;
};

Client bound(uint32_t ip) {
  Client c;
  c.ip = ip;
  c.fd.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in a = addr(ip, 0);
  EXPECT_EQ(::bind(c.fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(c.fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  c.port = ntohs(a.sin_port);
  return c;
}

class ReflectorLoopbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    keys_.set(kReflectorRun, key_);
    ReflectorConfig rc;
    rc.udp_port = 0;  // any free port, on every address
    reflector_ = std::make_unique<Reflector>(keys_, rc);
    const Status st = reflector_->start();
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    port_ = reflector_->udp_port();
  }

  std::array<uint8_t, kProbeSize> request(const Client& from, uint32_t to, uint32_t seq) {
    ProbeHeader h;
    h.campaign = kReflectorRun;
    h.sequence = seq;
    h.sport = from.port;
    h.dport = port_;
    h.send_time_ns = realtime_ns();
    h.tuple = {.src_ip = from.ip, .dst_ip = to, .proto = 17, .sport = from.port, .dport = port_};
    std::array<uint8_t, kProbeSize> b{};
    encode_probe(h, key_, b);
    return b;
  }

  void send(const Client& from, uint32_t to, std::span<const uint8_t> pkt) {
    const sockaddr_in a = addr(to, port_);
    ASSERT_EQ(::sendto(from.fd.get(), pkt.data(), pkt.size(), 0, reinterpret_cast<const sockaddr*>(&a), sizeof a),
              static_cast<ssize_t>(pkt.size()));
  }

  // The reply to `c` (validated as the sender would), or false after 2 s.
  bool reply(const Client& c, ProbeHeader* h) {
    pollfd p{c.fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 2000) != 1) return false;
    std::array<uint8_t, 256> buf;
    sockaddr_in from{};
    socklen_t len = sizeof from;
    const ssize_t n = ::recvfrom(c.fd.get(), buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &len);
    if (n <= 0) return false;
    const FiveTuple seen{.src_ip = ntohl(from.sin_addr.s_addr), .dst_ip = c.ip, .proto = 17,
                         .sport = ntohs(from.sin_port), .dport = c.port};
    return accept_reply(std::span<const uint8_t>(buf.data(), static_cast<size_t>(n)), seen, kReflectorRun, key_,
                        ProbeType::kReply, sender_stats_, h);
  }

  // Waits until the reflector has refused `refused` packets and counted
  // `answered` answers as sent (or 2 s): its counters follow its sends.
  ProbeStats settled(uint64_t refused, uint64_t answered) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    ProbeStats s = reflector_->stats();
    while ((s.rejected_total() < refused || s.answered < answered) && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      s = reflector_->stats();
    }
    return s;
  }

  MacKey key_ = MacKey::from_string("loopback key");
  KeyRing keys_;
  std::unique_ptr<Reflector> reflector_;
  uint16_t port_ = 0;
  ProbeStats sender_stats_;
};

TEST_F(ReflectorLoopbackTest, ACapturedRequestSentAgainFromAnywhereIsRefusedUnderItsReason) {
  const Client a = bound(kLo1), other_port = bound(kLo1);
  const auto captured = request(a, kLo1, 1);
  send(a, kLo1, captured);
  ProbeHeader h;
  ASSERT_TRUE(reply(a, &h));
  EXPECT_EQ(h.sequence, 1u);
  send(a, kLo1, captured);           // from its own source: replayed
  send(other_port, kLo1, captured);  // from another port: bad_source
  send(a, kLo2, captured);           // to another address of the host: bad_destination
  const ProbeStats s = settled(3, 1);
  EXPECT_EQ(s.rejected_for(Reject::kReplayed), 1u);
  EXPECT_EQ(s.rejected_for(Reject::kBadSource), 1u);
  EXPECT_EQ(s.rejected_for(Reject::kBadDestination), 1u);
  EXPECT_EQ(s.rejected_total(), 3u);
  // A genuine request after all that is still answered.
  send(a, kLo1, request(a, kLo1, 2));
  ASSERT_TRUE(reply(a, &h));
  EXPECT_EQ(h.sequence, 2u);
  EXPECT_EQ(settled(3, 2).answered, 2u);
  EXPECT_EQ(sender_stats_.rejected_total(), 0u);
}

// The reflector listens on every address; a request to 127.0.0.2 must be
// answered from 127.0.0.2 (the reply's MAC names it), not from the address
// the kernel would pick for the route back.
TEST_F(ReflectorLoopbackTest, TheReplyLeavesFromTheAddressTheRequestWasSentTo) {
  const Client c = bound(kLo3);
  send(c, kLo2, request(c, kLo2, 5));
  ProbeHeader h;
  ASSERT_TRUE(reply(c, &h)) << "rejected by the sender: " << sender_stats_.rejected_by_name().size() << " reasons";
  EXPECT_EQ(h.tuple.src_ip, kLo2);
  EXPECT_EQ(h.tuple.dst_ip, kLo3);
  EXPECT_EQ(h.tuple.sport, port_);
  EXPECT_EQ(sender_stats_.rejected_total(), 0u);
}

// Under a flood its socket never empties: the receive loop must still look
// at stop() between batches. Two threads resend captured requests (each a
// replay, refused after its MAC is checked) as fast as sendmmsg(2) goes.
TEST_F(ReflectorLoopbackTest, StopReturnsPromptlyWhileItsPortIsFlooded) {
  constexpr int kFloodBatch = 64;
  std::atomic<bool> flooding{true};
  std::atomic<uint64_t> flooded{0};
  std::vector<std::thread> flooders;
  for (int t = 0; t < 2; ++t) {
    flooders.emplace_back([&, t] {
      const Client c = bound(kLo1);
      const auto captured = request(c, kLo1, 1000 + static_cast<uint32_t>(t));
      sockaddr_in to = addr(kLo1, port_);
      std::array<iovec, kFloodBatch> iov;
      std::array<mmsghdr, kFloodBatch> msgs{};
      for (int i = 0; i < kFloodBatch; ++i) {
        iov[i] = {const_cast<uint8_t*>(captured.data()), captured.size()};
        msgs[i].msg_hdr.msg_name = &to;
        msgs[i].msg_hdr.msg_namelen = sizeof to;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(4);
      while (flooding && std::chrono::steady_clock::now() < until) {
        const int r = ::sendmmsg(c.fd.get(), msgs.data(), kFloodBatch, 0);
        if (r > 0) flooded += static_cast<uint64_t>(r);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t0 = std::chrono::steady_clock::now();
  reflector_->stop();
  const auto took = std::chrono::steady_clock::now() - t0;
  flooding = false;
  for (auto& f : flooders) f.join();
  EXPECT_GT(flooded.load(), 0u);
  EXPECT_GT(reflector_->stats().rejected_for(Reject::kReplayed), 0u);
  EXPECT_LT(took, std::chrono::seconds(1)) << "stop() waited for the flood to end";
}

// The reflector's X (8 here) names the reply's spine field; a campaign whose
// probes leave with another X (`weft probe --probe-dscp`) must read the spine
// from the DSCP the reflector saw and its own X. On loopback no spine rewrites
// the DSCP, so every answer is the same leaf: spine 0, whatever the two X are.
TEST_F(ReflectorLoopbackTest, TheSenderReadsTheSpineWithItsCampaignsDscpNotTheReflectors) {
  struct {
    uint8_t campaign_x;
    int dscp_seen;
    int spine;
  } const cases[] = {{10, 10, 0}, {6, 6, 0}};  // the reflector's reading: spine 2; unknown (6 < 8)
  uint32_t seq = 40;
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::Message() << "campaign X " << int{c.campaign_x});
    SenderConfig sc;
    sc.local_ip = kLo1;
    sc.dport = port_;
    sc.probe_dscp = c.campaign_x;
    sc.run = kReflectorRun;
    sc.key = key_;
    auto tx = make_sender("udp", sc);
    ASSERT_TRUE(tx) << tx.status().to_string();
    const uint16_t sport = bound(kLo1).port;  // a port free a moment ago; the socket is closed again
    ASSERT_TRUE((*tx)->open_ports(sport, 1).is_ok());
    const ProbeSend probe{.dst_ip = kLo1, .sport = sport, .sequence = ++seq};
    ASSERT_TRUE((*tx)->send(std::span<const ProbeSend>(&probe, 1)).is_ok());
    std::vector<ProbeAnswer> got;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (got.empty() && std::chrono::steady_clock::now() < until) ASSERT_TRUE((*tx)->poll(20, got).is_ok());
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].sequence, seq);
    EXPECT_EQ(got[0].dscp_seen, c.dscp_seen);
    EXPECT_EQ(got[0].spine, c.spine);
  }
}

}  // namespace
}  // namespace weft::probe
