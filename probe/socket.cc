// The kernel UDP sender: one socket per source port of the window, bound to the
// host's address, so every probe's 5-tuple is exactly the one a RoCEv2 (or any
// UDP) flow from that port would have.
//   DSCP method: IP_TOS = X << 2 on each socket (ip(7)); the reflector answers.
//   TTL method:  IP_TTL = 2 and IP_RECVERR: the first spine's ICMP time-exceeded
//                lands on the socket's error queue with the original payload and
//                the offender's address (SO_EE_OFFENDER, ip(7) "IP_RECVERR").
// Sends are batched per socket with sendmmsg(2); receives drain with recvmmsg(2).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "weft/probe/backend.h"
#include "weft/probe/fd.h"
#include "weft/probe/send_loop.h"
#include "weft/probe/validate.h"
#include "weft/common/ipv4.h"

namespace weft::probe {

using routing::kProtoUdp;

std::string_view method_name(Method m) { return m == Method::kDscp ? "dscp" : "ttl"; }

Result<Method> parse_method(std::string_view s) {
  if (s == "dscp") return Method::kDscp;
  if (s == "ttl") return Method::kTtl;
  return invalid_argument(fmt::format("unknown probe method '{}' (dscp, ttl)", s));
}

std::string interface_of(uint32_t ip) {
  ifaddrs* ifs = nullptr;
  std::string dev;
  if (::getifaddrs(&ifs) != 0) return dev;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
        ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr) == ip) {
      dev = i->ifa_name;
      break;
    }
  }
  ::freeifaddrs(ifs);
  return dev;
}

uint8_t spine_from_dscp(uint8_t dscp_seen, uint8_t probe_dscp) {
  if (dscp_seen < probe_dscp || dscp_seen > 63) return kSpineUnknown;
  return static_cast<uint8_t>(dscp_seen - probe_dscp);
}

int spine_of_answer(uint8_t dscp_seen, uint8_t probe_dscp) {
  const uint8_t spine = spine_from_dscp(dscp_seen, probe_dscp);
  return spine == kSpineUnknown ? -1 : spine;
}

SendLoopTally send_until_done(size_t n, int spin_budget, const std::function<int(size_t done)>& send_from) {
  SendLoopTally t;
  size_t done = 0;
  int spins = 0, pending_errors = 0;
  while (done < n) {
    const int r = send_from(done);
    if (r > 0) {
      done += static_cast<size_t>(r);
      t.sent += static_cast<uint64_t>(r);
      pending_errors = 0;
      spins = 0;  // the budget is for one stall, not for the whole group
    } else if (r < 0 && (errno == EAGAIN || errno == ENOBUFS) && ++spins < spin_budget) {
      continue;  // the socket buffer drains at line rate; retry briefly
    } else if (r < 0 && (errno == EHOSTUNREACH || errno == ENETUNREACH || errno == ECONNREFUSED) &&
               ++pending_errors < 3) {
      // With IP_RECVERR every ICMP error (the TTL method's time-exceeded
      // included) also sets sk_err, which the next send returns once and
      // clears (udp(7), ip(7) IP_RECVERR) without sending: send it again.
      continue;
    } else {
      ++t.errors;  // this probe cannot leave; the next may
      ++done;
      pending_errors = 0;
    }
  }
  return t;
}

namespace {

class UdpSender final : public SenderBackend {
 public:
  explicit UdpSender(const SenderConfig& cfg) : cfg_(cfg), epoll_(::epoll_create1(EPOLL_CLOEXEC)) {}
  std::string_view name() const override { return "udp"; }

  Status open_ports(uint16_t first, uint16_t count) override {
    if (!epoll_) return io_error("epoll_create1", errno);
    socks_.clear();
    first_ = first;
    for (uint32_t i = 0; i < count; ++i) {
      const uint16_t port = static_cast<uint16_t>(first + i);
      UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!fd) return io_error("socket(UDP)", errno);
      const int tos = cfg_.probe_dscp << 2, one = 1, rcvbuf = 1 << 20;
      if (::setsockopt(fd.get(), IPPROTO_IP, IP_TOS, &tos, sizeof tos) != 0) return io_error("IP_TOS", errno);
      set_rcvbuf(fd.get(), rcvbuf);
      if (cfg_.method == Method::kTtl) {
        const int ttl = cfg_.ttl;
        if (::setsockopt(fd.get(), IPPROTO_IP, IP_TTL, &ttl, sizeof ttl) != 0) return io_error("IP_TTL", errno);
        if (::setsockopt(fd.get(), IPPROTO_IP, IP_RECVERR, &one, sizeof one) != 0) return io_error("IP_RECVERR", errno);
      }
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(port);
      a.sin_addr.s_addr = htonl(cfg_.local_ip);
      if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        return io_error(fmt::format("binding probe source port {}:{}", ipv4_str(cfg_.local_ip), port), errno);
      }
      epoll_event ev{};
      ev.events = EPOLLIN;  // EPOLLERR is always reported: the TTL method's ICMP errors
      ev.data.u32 = i;
      if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd.get(), &ev) != 0) return io_error("epoll_ctl", errno);
      socks_.push_back(std::move(fd));
    }
    return ok_status();
  }

  Status send(std::span<const ProbeSend> probes) override {
    // Group by source port: one sendmmsg per socket.
    std::map<uint16_t, std::vector<const ProbeSend*>> by_port;
    for (const auto& p : probes) by_port[p.sport].push_back(&p);
    for (auto& [port, list] : by_port) {
      const uint32_t idx = static_cast<uint32_t>(port - first_);
      if (port < first_ || idx >= socks_.size()) {
        return failed_precondition(fmt::format("source port {} is outside the open window", port));
      }
      const size_t n = list.size();
      bufs_.resize(n);
      addrs_.resize(n);
      iovs_.resize(n);
      msgs_.assign(n, mmsghdr{});
      for (size_t i = 0; i < n; ++i) {
        ProbeHeader h;
        h.type = ProbeType::kRequest;
        h.flags = cfg_.method == Method::kTtl ? kFlagTtl : 0;
        h.campaign = cfg_.run;
        h.sequence = list[i]->sequence;
        h.sport = port;
        h.dport = cfg_.dport;
        h.send_time_ns = realtime_ns();
        h.tuple = {.src_ip = cfg_.local_ip, .dst_ip = list[i]->dst_ip, .proto = kProtoUdp, .sport = port,
                   .dport = cfg_.dport};
        encode_probe(h, cfg_.key, std::span<uint8_t, kProbeSize>(bufs_[i].data(), kProbeSize));
        addrs_[i] = sockaddr_in{};
        addrs_[i].sin_family = AF_INET;
        addrs_[i].sin_port = htons(cfg_.dport);
        addrs_[i].sin_addr.s_addr = htonl(list[i]->dst_ip);
        iovs_[i] = {bufs_[i].data(), kProbeSize};
        msgs_[i].msg_hdr.msg_name = &addrs_[i];
        msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
        msgs_[i].msg_hdr.msg_iov = &iovs_[i];
        msgs_[i].msg_hdr.msg_iovlen = 1;
      }
      const SendLoopTally t = send_until_done(n, kSendSpins, [&](size_t done) {
        return ::sendmmsg(socks_[idx].get(), msgs_.data() + done, static_cast<unsigned>(n - done), 0);
      });
      stats_.sent += t.sent;
      stats_.send_errors += t.errors;
    }
    return ok_status();
  }

  Status poll(int timeout_ms, std::vector<ProbeAnswer>& out) override {
    epoll_event evs[64];
    const int n = ::epoll_wait(epoll_.get(), evs, 64, timeout_ms);
    if (n < 0) return errno == EINTR ? ok_status() : io_error("epoll_wait", errno);
    for (int i = 0; i < n; ++i) {
      const uint32_t idx = evs[i].data.u32;
      if (idx >= socks_.size()) continue;
      drain(idx, out);
      if (cfg_.method == Method::kTtl) drain_errors(idx, out);
    }
    return ok_status();
  }

 private:
  static constexpr int kBatch = 64;
  // Batches read from one socket per poll(): a socket that never empties (a
  // flood of packets to a probe port) must not keep poll() from returning to
  // the campaign, which checks its deadline and a cancel between polls
  // (campaign.cc). What is left is read at the next poll (epoll is level-
  // triggered, epoll(7)).
  static constexpr int kBatchesPerPoll = 16;
  // sendmmsg(2) attempts that may fail with EAGAIN/ENOBUFS in a row before
  // a probe is given up (counted in send_errors).
  static constexpr int kSendSpins = 1000;

  void drain(uint32_t idx, std::vector<ProbeAnswer>& out) {
    std::array<std::array<uint8_t, 256>, kBatch> rb;
    std::array<iovec, kBatch> iov;
    std::array<sockaddr_in, kBatch> from;
    std::array<mmsghdr, kBatch> msgs{};
    for (int pass = 0; pass < kBatchesPerPoll; ++pass) {
      for (int i = 0; i < kBatch; ++i) {
        iov[i] = {rb[i].data(), rb[i].size()};
        msgs[i] = mmsghdr{};
        msgs[i].msg_hdr.msg_name = &from[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      const int r = ::recvmmsg(socks_[idx].get(), msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
      if (r <= 0) return;
      const uint64_t now = realtime_ns();
      for (int i = 0; i < r; ++i) {
        ProbeHeader h;
        const FiveTuple seen{.src_ip = ntohl(from[i].sin_addr.s_addr), .dst_ip = cfg_.local_ip, .proto = kProtoUdp,
                             .sport = ntohs(from[i].sin_port), .dport = static_cast<uint16_t>(first_ + idx)};
        if (!accept_reply(std::span<const uint8_t>(rb[i].data(), msgs[i].msg_len), seen, cfg_.run, cfg_.key,
                          ProbeType::kReply, stats_, &h)) {
          continue;
        }
        ProbeAnswer a;
        a.sequence = h.sequence;
        a.dst_ip = ntohl(from[i].sin_addr.s_addr);
        a.sport = static_cast<uint16_t>(first_ + idx);
        a.dscp_seen = h.dscp_seen;
        a.spine = spine_of_answer(h.dscp_seen, cfg_.probe_dscp);
        a.rtt_ns = now > h.send_time_ns ? now - h.send_time_ns : 0;
        if (h.sport != a.sport) {
          stats_.reject(Reject::kUnexpected);  // a valid reply for another port: not ours to use
          continue;
        }
        out.push_back(a);
      }
      if (r < kBatch) return;
    }
  }

  void drain_errors(uint32_t idx, std::vector<ProbeAnswer>& out) {
    for (int n = 0; n < kBatch * kBatchesPerPoll; ++n) {  // bounded like drain()
      uint8_t payload[256];
      alignas(cmsghdr) uint8_t control[512];
      sockaddr_in target{};
      iovec iov{payload, sizeof payload};
      msghdr m{};
      m.msg_name = &target;
      m.msg_namelen = sizeof target;
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      m.msg_control = control;
      m.msg_controllen = sizeof control;
      const ssize_t r = ::recvmsg(socks_[idx].get(), &m, MSG_ERRQUEUE | MSG_DONTWAIT);
      if (r < 0) return;
      const uint64_t now = realtime_ns();
      for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != IPPROTO_IP || c->cmsg_type != IP_RECVERR) continue;
        sock_extended_err ee;
        std::memcpy(&ee, CMSG_DATA(c), sizeof ee);
        // ICMP type 11 = time exceeded (RFC 792); anything else (unreachable) is not a hop.
        if (ee.ee_origin != SO_EE_ORIGIN_ICMP || ee.ee_type != 11) continue;
        sockaddr_in off;
        std::memcpy(&off, SO_EE_OFFENDER(reinterpret_cast<sock_extended_err*>(CMSG_DATA(c))), sizeof off);
        ProbeHeader h;
        // The quoted payload is our own request: it must carry our MAC and the
        // 5-tuple the error names (this socket's port to the target).
        const FiveTuple quoted{.src_ip = cfg_.local_ip, .dst_ip = ntohl(target.sin_addr.s_addr), .proto = kProtoUdp,
                               .sport = static_cast<uint16_t>(first_ + idx), .dport = ntohs(target.sin_port)};
        if (!accept_reply(std::span<const uint8_t>(payload, static_cast<size_t>(r)), quoted, cfg_.run, cfg_.key,
                          ProbeType::kRequest, stats_, &h)) {
          continue;
        }
        ProbeAnswer a;
        a.sequence = h.sequence;
        a.dst_ip = ntohl(target.sin_addr.s_addr);
        a.sport = static_cast<uint16_t>(first_ + idx);
        a.hop_ip = ntohl(off.sin_addr.s_addr);
        a.rtt_ns = now > h.send_time_ns ? now - h.send_time_ns : 0;
        out.push_back(a);
      }
    }
  }

  SenderConfig cfg_;
  UniqueFd epoll_;
  std::vector<UniqueFd> socks_;
  uint16_t first_ = 0;
  std::vector<std::array<uint8_t, kProbeSize>> bufs_;
  std::vector<sockaddr_in> addrs_;
  std::vector<iovec> iovs_;
  std::vector<mmsghdr> msgs_;
};

}  // namespace

Result<std::unique_ptr<SenderBackend>> make_udp_sender(const SenderConfig& cfg) {
  return std::unique_ptr<SenderBackend>(new UdpSender(cfg));
}

}  // namespace weft::probe
