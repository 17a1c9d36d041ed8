// The TCP-SYN side of the reflector: libpcap captures SYNs to the data port
// (pcap-filter(7): "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn"), reads the
// TOS byte from the IPv4 header and answers over UDP to the port the probe
// names. The kernel answers the SYN itself (SYN-ACK from a listener, RST
// otherwise); the probe's data rides in the SYN and is never seen by TCP.
// Needs CAP_NET_RAW.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pcap/pcap.h>
#include <poll.h>

#include <cstring>

#include <fmt/format.h>

#include "weft/probe/backend.h"
#include "weft/probe/reflector.h"

namespace weft::probe {

struct Reflector::PcapState {
  pcap_t* p = nullptr;
  int link_offset = 0;
  ~PcapState() {
    if (p) pcap_close(p);
  }
};

void Reflector::PcapDeleter::operator()(PcapState* p) const { delete p; }

namespace {

std::string device_for(uint32_t ip) {
  const std::string dev = ip == 0 ? "" : interface_of(ip);
  return dev.empty() ? "any" : dev;
}

}  // namespace

Status Reflector::start_pcap() {
  pcap_.reset(new PcapState());
  const std::string dev = cfg_.pcap_device.empty() ? device_for(cfg_.bind_ip) : cfg_.pcap_device;
  char err[PCAP_ERRBUF_SIZE] = {};
  pcap_->p = pcap_create(dev.c_str(), err);
  if (!pcap_->p) return unavailable(fmt::format("pcap on {}: {}", dev, err));
  pcap_set_snaplen(pcap_->p, 256);
  pcap_set_immediate_mode(pcap_->p, 1);  // deliver each SYN now, not when a buffer fills
  pcap_set_buffer_size(pcap_->p, 8 << 20);
  const int rc = pcap_activate(pcap_->p);
  if (rc < 0) {
    return Status(rc == PCAP_ERROR_PERM_DENIED ? StatusCode::kPermissionDenied : StatusCode::kUnavailable,
                  fmt::format("pcap on {}: {} (TCP-SYN probes need CAP_NET_RAW)", dev, pcap_geterr(pcap_->p)));
  }
  switch (pcap_datalink(pcap_->p)) {
    case DLT_EN10MB: pcap_->link_offset = 14; break;
    case DLT_LINUX_SLL: pcap_->link_offset = 16; break;
    case DLT_LINUX_SLL2: pcap_->link_offset = 20; break;
    case DLT_RAW: pcap_->link_offset = 0; break;
    default: return unavailable(fmt::format("pcap on {}: unsupported link type {}", dev, pcap_datalink(pcap_->p)));
  }
  pcap_setdirection(pcap_->p, PCAP_D_IN);
  std::string filter = fmt::format("tcp dst port {} and tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn", cfg_.tcp_port);
  if (cfg_.bind_ip) {
    filter += fmt::format(" and dst host {}.{}.{}.{}", cfg_.bind_ip >> 24, (cfg_.bind_ip >> 16) & 0xff,
                          (cfg_.bind_ip >> 8) & 0xff, cfg_.bind_ip & 0xff);
  }
  bpf_program prog{};
  if (pcap_compile(pcap_->p, &prog, filter.c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0 ||
      pcap_setfilter(pcap_->p, &prog) != 0) {
    pcap_freecode(&prog);
    return internal_error(fmt::format("pcap filter '{}': {}", filter, pcap_geterr(pcap_->p)));
  }
  pcap_freecode(&prog);
  if (pcap_setnonblock(pcap_->p, 1, err) != 0) return internal_error(fmt::format("pcap_setnonblock: {}", err));
  pcap_thread_ = std::thread([this] { pcap_loop(); });
  return ok_status();
}

void Reflector::stop_pcap() { pcap_.reset(); }

void Reflector::pcap_loop() {
  pollfd fds[2] = {{pcap_get_selectable_fd(pcap_->p), POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
  while (running_) {
    if (::poll(fds, 2, 200) <= 0 || (fds[1].revents & POLLIN)) continue;
    pcap_dispatch(
        pcap_->p, -1,
        [](u_char* self, const pcap_pkthdr* hdr, const u_char* bytes) {
          reinterpret_cast<Reflector*>(self)->handle_frame(bytes, hdr->caplen);
        },
        reinterpret_cast<u_char*>(this));
    flush_answers();
  }
}

// IPv4 (RFC 791) + TCP (RFC 9293) by hand: the capture hands us bytes, and the
// probe payload follows the TCP header (data offset in 32-bit words).
void Reflector::handle_frame(const uint8_t* data, size_t caplen) {
  const size_t off = static_cast<size_t>(pcap_->link_offset);
  if (caplen < off + 20) return;
  const uint8_t* ip = data + off;
  if ((ip[0] >> 4) != 4 || ip[9] != IPPROTO_TCP) return;
  const size_t ihl = static_cast<size_t>(ip[0] & 0x0f) * 4;
  if (ihl < 20 || caplen < off + ihl + 20) return;
  const uint8_t tos = ip[1];
  uint32_t src, dst;
  std::memcpy(&src, ip + 12, 4);
  std::memcpy(&dst, ip + 16, 4);
  src = ntohl(src);
  dst = ntohl(dst);
  const uint8_t* tcp = ip + ihl;
  const uint16_t sport = static_cast<uint16_t>(tcp[0] << 8 | tcp[1]);
  const uint16_t dport = static_cast<uint16_t>(tcp[2] << 8 | tcp[3]);
  const size_t doff = static_cast<size_t>(tcp[12] >> 4) * 4;
  const size_t payload_at = off + ihl + doff;
  const size_t payload_len = caplen > payload_at ? caplen - payload_at : 0;
  ProbeHeader h;
  bool ok;
  {
    std::lock_guard lock(mu_);
    const FiveTuple seen{.src_ip = src, .dst_ip = dst, .proto = routing::kProtoTcp, .sport = sport, .dport = dport};
    ok = acceptor_->accept(std::span<const uint8_t>(data + payload_at, payload_len), seen, realtime_ns(), &h);
    if (ok && (h.sport != sport || h.dport != dport || h.reply_port == 0 || !(h.flags & kFlagTcp))) {
      stats_.reject(Reject::kUnexpected);
      ok = false;
    }
  }
  if (ok) answer(h, static_cast<uint8_t>(tos >> 2), dst, src, h.reply_port);
}

}  // namespace weft::probe
