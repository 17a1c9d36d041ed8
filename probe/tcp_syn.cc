// The TCP-SYN sender: a raw IPPROTO_TCP socket (raw(7)) sends hand-built SYNs
// from any source port of the window to the data port, so ECMP hashes exactly
// the 5-tuple (protocol 6) that the TCP transport's connection will have. The
// kernel adds the IPv4 header with the socket's TOS (DSCP X). The probe rides as
// SYN data; the reflector's pcap reads it and answers over UDP to reply_port.
// Needs CAP_NET_RAW. The kernel of this host answers any SYN-ACK with a RST
// (there is no socket for the port): harmless, and it frees the listener's slot.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "weft/probe/backend.h"
#include "weft/probe/fd.h"
#include "weft/probe/validate.h"

namespace weft::probe {
namespace {

constexpr size_t kTcpHeader = 20;

// RFC 1071 ones'-complement sum over the pseudo header and the segment.
uint16_t tcp_checksum(uint32_t src, uint32_t dst, const uint8_t* seg, size_t len) {
  uint64_t sum = (src >> 16) + (src & 0xffff) + (dst >> 16) + (dst & 0xffff) + IPPROTO_TCP + len;
  for (size_t i = 0; i + 1 < len; i += 2) sum += static_cast<uint32_t>(seg[i] << 8 | seg[i + 1]);
  if (len & 1) sum += static_cast<uint32_t>(seg[len - 1] << 8);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

class TcpSynSender final : public SenderBackend {
 public:
  explicit TcpSynSender(const SenderConfig& cfg) : cfg_(cfg) {}
  std::string_view name() const override { return "tcp-syn"; }

  Status init() {
    raw_.reset(::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_TCP));
    if (!raw_) {
      return Status(errno == EPERM ? StatusCode::kPermissionDenied : StatusCode::kIo,
                    fmt::format("raw TCP socket: {} (TCP-SYN probes need CAP_NET_RAW)", std::strerror(errno)));
    }
    const int tos = cfg_.probe_dscp << 2;
    if (::setsockopt(raw_.get(), IPPROTO_IP, IP_TOS, &tos, sizeof tos) != 0) return io_error("IP_TOS", errno);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(cfg_.local_ip);
    if (::bind(raw_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return io_error("bind raw socket", errno);
    // Answers come back over UDP.
    udp_.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!udp_) return io_error("socket(UDP)", errno);
    const int rcvbuf = 4 << 20;
    set_rcvbuf(udp_.get(), rcvbuf);
    a.sin_port = htons(cfg_.reply_port);
    if (::bind(udp_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      return io_error(fmt::format("binding reply port {}", cfg_.reply_port), errno);
    }
    socklen_t len = sizeof a;
    ::getsockname(udp_.get(), reinterpret_cast<sockaddr*>(&a), &len);
    reply_port_ = ntohs(a.sin_port);
    return ok_status();
  }

  Status open_ports(uint16_t first, uint16_t count) override {
    first_ = first;
    count_ = count;
    return ok_status();  // raw sends need no per-port state
  }

  Status send(std::span<const ProbeSend> probes) override {
    constexpr size_t kBatch = 64;
    std::array<std::array<uint8_t, kTcpHeader + kProbeSize>, kBatch> bufs;
    std::array<sockaddr_in, kBatch> to;
    std::array<iovec, kBatch> iov;
    std::array<mmsghdr, kBatch> msgs;
    for (size_t at = 0; at < probes.size(); at += kBatch) {
      const size_t n = std::min(kBatch, probes.size() - at);
      for (size_t i = 0; i < n; ++i) {
        const ProbeSend& p = probes[at + i];
        if (p.sport < first_ || p.sport >= first_ + count_) {
          return failed_precondition(fmt::format("source port {} is outside the open window", p.sport));
        }
        uint8_t* seg = bufs[i].data();
        std::memset(seg, 0, kTcpHeader);
        seg[0] = static_cast<uint8_t>(p.sport >> 8);
        seg[1] = static_cast<uint8_t>(p.sport);
        seg[2] = static_cast<uint8_t>(cfg_.dport >> 8);
        seg[3] = static_cast<uint8_t>(cfg_.dport);
        const uint32_t isn = p.sequence * 2654435761u;  // any ISN; derived so retries differ
        for (int b = 0; b < 4; ++b) seg[4 + b] = static_cast<uint8_t>(isn >> (24 - 8 * b));
        seg[12] = 5 << 4;  // data offset 5 words
        seg[13] = 0x02;    // SYN
        seg[14] = 0xfa;    // window 64240
        seg[15] = 0xf0;
        ProbeHeader h;
        h.type = ProbeType::kRequest;
        h.flags = kFlagTcp;
        h.campaign = cfg_.run;
        h.sequence = p.sequence;
        h.sport = p.sport;
        h.dport = cfg_.dport;
        h.reply_port = reply_port_;
        h.send_time_ns = realtime_ns();
        h.tuple = {.src_ip = cfg_.local_ip, .dst_ip = p.dst_ip, .proto = routing::kProtoTcp, .sport = p.sport,
                   .dport = cfg_.dport};
        encode_probe(h, cfg_.key, std::span<uint8_t, kProbeSize>(seg + kTcpHeader, kProbeSize));
        const uint16_t ck = tcp_checksum(cfg_.local_ip, p.dst_ip, seg, kTcpHeader + kProbeSize);
        seg[16] = static_cast<uint8_t>(ck >> 8);
        seg[17] = static_cast<uint8_t>(ck);
        to[i] = sockaddr_in{};
        to[i].sin_family = AF_INET;
        to[i].sin_addr.s_addr = htonl(p.dst_ip);
        iov[i] = {seg, kTcpHeader + kProbeSize};
        msgs[i] = mmsghdr{};
        msgs[i].msg_hdr.msg_name = &to[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      size_t done = 0;
      int spins = 0;
      while (done < n) {
        const int r = ::sendmmsg(raw_.get(), msgs.data() + done, static_cast<unsigned>(n - done), MSG_DONTWAIT);
        if (r > 0) {
          done += static_cast<size_t>(r);
          stats_.sent += static_cast<uint64_t>(r);
          spins = 0;  // the budget is for one stall, not for the whole batch
        } else if (r < 0 && (errno == EAGAIN || errno == ENOBUFS) && ++spins < 1000) {
          continue;
        } else {
          stats_.send_errors += n - done;
          break;
        }
      }
    }
    return ok_status();
  }

  Status poll(int timeout_ms, std::vector<ProbeAnswer>& out) override {
    pollfd fd{udp_.get(), POLLIN, 0};
    const int n = ::poll(&fd, 1, timeout_ms);
    if (n < 0) return errno == EINTR ? ok_status() : io_error("poll", errno);
    if (n == 0) return ok_status();
    // At most kReadsPerPoll datagrams: a reply port that never empties (a
    // flood) must not keep poll() from returning to the campaign, which
    // checks its deadline and a cancel between polls (campaign.cc); the rest
    // is read at the next poll.
    for (int reads = 0; reads < kReadsPerPoll; ++reads) {
      uint8_t buf[256];
      sockaddr_in from{};
      socklen_t fl = sizeof from;
      const ssize_t r = ::recvfrom(udp_.get(), buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &fl);
      if (r < 0) return ok_status();
      ProbeHeader h;
      const FiveTuple seen{.src_ip = ntohl(from.sin_addr.s_addr), .dst_ip = cfg_.local_ip, .proto = routing::kProtoUdp,
                           .sport = ntohs(from.sin_port), .dport = reply_port_};
      if (!accept_reply(std::span<const uint8_t>(buf, static_cast<size_t>(r)), seen, cfg_.run, cfg_.key,
                        ProbeType::kReply, stats_, &h)) {
        continue;
      }
      ProbeAnswer a;
      a.sequence = h.sequence;
      a.dst_ip = ntohl(from.sin_addr.s_addr);
      a.sport = h.sport;
      a.dscp_seen = h.dscp_seen;
      a.spine = spine_of_answer(h.dscp_seen, cfg_.probe_dscp);
      const uint64_t now = realtime_ns();
      a.rtt_ns = now > h.send_time_ns ? now - h.send_time_ns : 0;
      out.push_back(a);
    }
    return ok_status();
  }

 private:
  static constexpr int kReadsPerPoll = 1024;
  SenderConfig cfg_;
  UniqueFd raw_, udp_;
  uint16_t reply_port_ = 0;
  uint16_t first_ = 0, count_ = 0;
};

}  // namespace

Result<std::unique_ptr<SenderBackend>> make_tcp_syn_sender(const SenderConfig& cfg) {
  if (cfg.method != Method::kDscp) {
    return invalid_argument("the tcp-syn backend supports the dscp method only (use udp for the TTL method)");
  }
  auto s = std::make_unique<TcpSynSender>(cfg);
  WEFT_RETURN_IF_ERROR(s->init());
  return std::unique_ptr<SenderBackend>(std::move(s));
}

}  // namespace weft::probe
