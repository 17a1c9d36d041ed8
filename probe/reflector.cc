// The UDP side of the reflector (reflector.h). IP_RECVTOS delivers each
// datagram's TOS byte as an IP_TOS control message (ip(7)); DSCP = TOS >> 2
// (RFC 2474). IP_PKTINFO delivers the address the datagram was sent to (the
// MAC-covered destination, also when bound to 0.0.0.0) and, on sendmsg,
// makes the reply leave from it. The TCP-SYN side (libpcap) is in
// reflector_pcap.cc.
#include "weft/probe/reflector.h"

#include "weft/probe/backend.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace weft::probe {

Reflector::Reflector(const KeyRing& keys, ReflectorConfig cfg) : keys_(keys), cfg_(std::move(cfg)) {}

Reflector::~Reflector() { stop(); }

Status Reflector::start() {
  if (running_) return failed_precondition("reflector already running");
  if (cfg_.probe_dscp > 63 || cfg_.reply_dscp > 63) return invalid_argument("DSCP values must be <= 63");
  if (cfg_.reply_dscp == cfg_.probe_dscp) {
    return invalid_argument("reply DSCP must differ from the probe DSCP, or spines would rewrite answers");
  }
  acceptor_ = std::make_unique<RequestAcceptor>(keys_, stats_, cfg_.accept);
  udp_.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!udp_) return io_error("socket(UDP)", errno);
  const int one = 1, tos = cfg_.reply_dscp << 2, rcvbuf = 4 << 20;
  if (::setsockopt(udp_.get(), IPPROTO_IP, IP_RECVTOS, &one, sizeof one) != 0) return io_error("IP_RECVTOS", errno);
  if (::setsockopt(udp_.get(), IPPROTO_IP, IP_PKTINFO, &one, sizeof one) != 0) return io_error("IP_PKTINFO", errno);
  if (::setsockopt(udp_.get(), IPPROTO_IP, IP_TOS, &tos, sizeof tos) != 0) return io_error("IP_TOS", errno);
  set_rcvbuf(udp_.get(), rcvbuf);
  if (::setsockopt(udp_.get(), SOL_SOCKET, SO_SNDBUFFORCE, &rcvbuf, sizeof rcvbuf) != 0) {
    ::setsockopt(udp_.get(), SOL_SOCKET, SO_SNDBUF, &rcvbuf, sizeof rcvbuf);
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(cfg_.udp_port);
  a.sin_addr.s_addr = htonl(cfg_.bind_ip);
  if (::bind(udp_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    return io_error(fmt::format("reflector: binding UDP port {}", cfg_.udp_port), errno);
  }
  socklen_t len = sizeof a;
  ::getsockname(udp_.get(), reinterpret_cast<sockaddr*>(&a), &len);
  bound_port_ = ntohs(a.sin_port);
  stop_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_fd_) return io_error("eventfd", errno);
  running_ = true;
  udp_thread_ = std::thread([this] { udp_loop(); });
  if (cfg_.tcp_port != 0) {
    Status st = start_pcap();
    if (!st) {
      stop();
      return st;
    }
  }
  return ok_status();
}

void Reflector::stop() {
  if (!running_.exchange(false)) return;
  const uint64_t one = 1;
  (void)!::write(stop_fd_.get(), &one, sizeof one);
  if (udp_thread_.joinable()) udp_thread_.join();
  if (pcap_thread_.joinable()) pcap_thread_.join();
  stop_pcap();
}

ProbeStats Reflector::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Reflector::track_arrivals(uint32_t campaign) {
  std::lock_guard lock(mu_);
  arrivals_[campaign];
}

void Reflector::untrack_arrivals(uint32_t campaign) {
  std::lock_guard lock(mu_);
  arrivals_.erase(campaign);
}

std::map<std::pair<uint32_t, uint16_t>, uint64_t> Reflector::arrivals(uint32_t campaign) const {
  std::lock_guard lock(mu_);
  auto it = arrivals_.find(campaign);
  return it == arrivals_.end() ? std::map<std::pair<uint32_t, uint16_t>, uint64_t>{} : it->second;
}

void Reflector::answer(const ProbeHeader& req, uint8_t dscp_seen, uint32_t at_ip, uint32_t to_ip, uint16_t to_port) {
  {
    std::lock_guard lock(mu_);
    if (auto it = arrivals_.find(req.campaign); it != arrivals_.end()) {
      auto& by_source = it->second;
      const std::pair<uint32_t, uint16_t> src{req.tuple.src_ip, req.tuple.sport};
      if (auto c = by_source.find(src); c != by_source.end()) {
        ++c->second;
      } else if (by_source.size() < kMaxTrackedSources) {
        by_source.emplace(src, 1);
      }
    }
  }
  ProbeHeader rep = req;
  rep.type = ProbeType::kReply;
  rep.dscp_seen = dscp_seen;
  rep.spine = spine_from_dscp(dscp_seen, cfg_.probe_dscp);
  rep.tuple = {.src_ip = at_ip, .dst_ip = to_ip, .proto = routing::kProtoUdp, .sport = bound_port_, .dport = to_port};
  auto key = keys_.find(req.campaign);
  if (!key) return;  // retired between accept and answer
  Outgoing o;
  encode_probe(rep, *key, o.buf);
  o.to = sockaddr_in{};
  o.to.sin_family = AF_INET;
  o.to.sin_port = htons(to_port);
  o.to.sin_addr.s_addr = htonl(to_ip);
  o.ctl = {};
  cmsghdr* c = reinterpret_cast<cmsghdr*>(o.ctl.data());
  c->cmsg_level = IPPROTO_IP;
  c->cmsg_type = IP_PKTINFO;
  c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
  in_pktinfo pi{};
  pi.ipi_spec_dst.s_addr = htonl(at_ip);  // ip(7): the source address of the route lookup
  std::memcpy(CMSG_DATA(c), &pi, sizeof pi);
  std::lock_guard lock(out_mu_);
  out_.push_back(o);
}

// Sends the queued answers with sendmmsg(2); a full send buffer is waited for
// (briefly) rather than dropping answers on the floor.
void Reflector::flush_answers() {
  std::lock_guard lock(out_mu_);
  std::vector<mmsghdr> msgs(out_.size());
  std::vector<iovec> iov(out_.size());
  for (size_t i = 0; i < out_.size(); ++i) {
    iov[i] = {out_[i].buf.data(), out_[i].buf.size()};
    msgs[i] = mmsghdr{};
    msgs[i].msg_hdr.msg_name = &out_[i].to;
    msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_control = out_[i].ctl.data();
    msgs[i].msg_hdr.msg_controllen = out_[i].ctl.size();
  }
  size_t done = 0;
  uint64_t sent = 0, failed = 0;
  while (done < msgs.size()) {
    const int r = ::sendmmsg(udp_.get(), msgs.data() + done, static_cast<unsigned>(msgs.size() - done), 0);
    if (r > 0) {
      done += static_cast<size_t>(r);
      sent += static_cast<uint64_t>(r);
    } else if (r < 0 && (errno == EAGAIN || errno == ENOBUFS)) {
      pollfd p{udp_.get(), POLLOUT, 0};
      if (::poll(&p, 1, 10) <= 0) {
        failed += msgs.size() - done;
        break;
      }
    } else {
      ++failed;  // e.g. an ICMP error pending on the socket: skip this answer
      ++done;
    }
  }
  out_.clear();
  std::lock_guard slock(mu_);
  stats_.answered += sent;
  stats_.send_errors += failed;
}

void Reflector::udp_loop() {
  constexpr int kBatch = 64;
  std::array<std::array<uint8_t, 2048>, kBatch> rb;
  std::array<iovec, kBatch> iov;
  std::array<sockaddr_in, kBatch> from;
  struct alignas(cmsghdr) Control {
    uint8_t b[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(in_pktinfo))];
  };
  std::array<Control, kBatch> ctl;
  std::array<mmsghdr, kBatch> msgs;
  // Batches read before running_ is looked at again: under a flood the
  // socket never empties, and stop() waits for this thread (it joins it).
  constexpr int kBatchesPerCheck = 16;
  pollfd fds[2] = {{udp_.get(), POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
  while (running_) {
    if (::poll(fds, 2, 200) <= 0 || (fds[1].revents & POLLIN)) continue;
    for (int pass = 0; pass < kBatchesPerCheck && running_; ++pass) {
      for (int i = 0; i < kBatch; ++i) {
        iov[i] = {rb[i].data(), rb[i].size()};
        msgs[i] = mmsghdr{};
        msgs[i].msg_hdr.msg_name = &from[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_control = ctl[i].b;
        msgs[i].msg_hdr.msg_controllen = sizeof ctl[i].b;
      }
      const int r = ::recvmmsg(udp_.get(), msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
      if (r <= 0) break;
      const uint64_t now = realtime_ns();
      for (int i = 0; i < r; ++i) {
        int tos = -1;
        FiveTuple seen{.src_ip = ntohl(from[i].sin_addr.s_addr), .dst_ip = 0, .proto = routing::kProtoUdp,
                       .sport = ntohs(from[i].sin_port), .dport = bound_port_};
        for (cmsghdr* c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
          if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) tos = *CMSG_DATA(c);
          if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
            in_pktinfo pi;
            std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
            seen.dst_ip = ntohl(pi.ipi_addr.s_addr);  // the header's destination address (ip(7))
          }
        }
        const uint16_t sport = seen.sport;
        ProbeHeader h;
        bool ok;
        {
          std::lock_guard lock(mu_);
          ok = acceptor_->accept(std::span<const uint8_t>(rb[i].data(), msgs[i].msg_len), seen, now, &h);
          // A request naming another source port than it came from is not a probe of this 5-tuple.
          if (ok && (h.sport != sport || tos < 0)) {
            stats_.reject(Reject::kUnexpected);
            ok = false;
          }
        }
        if (ok) answer(h, static_cast<uint8_t>(tos >> 2), seen.dst_ip, seen.src_ip, sport);
      }
      flush_answers();
      if (r < kBatch) break;
    }
  }
}

}  // namespace weft::probe
