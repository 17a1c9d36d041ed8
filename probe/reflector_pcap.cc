// The TCP-SYN side of the reflector: libpcap captures SYNs to the data port
// (pcap-filter(7): "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn"), reads the
// TOS byte from the IPv4 header and answers over UDP to the port the probe
// names. The kernel answers the SYN itself (SYN-ACK from a listener, RST
// otherwise); the probe's data rides in the SYN and is never seen by TCP.
// Needs CAP_NET_RAW.
//
// A capture can break under an agent that runs for months. When its interface
// is deleted (a veth made again, a driver reset), pcap_dispatch(3PCAP)
// returns PCAP_ERROR ("The interface disappeared") and the handle never
// delivers another packet, not even once an interface of the same name is
// back. pcap_loop then closes the handle and opens the device again, with a
// back-off, for as long as the reflector runs. A link that only goes down and
// up keeps its handle: poll(2) reports POLLERR once, pcap_dispatch reads the
// socket's error and returns 0, and capture carries on once the link is up
// (libpcap 1.10, measured).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pcap/pcap.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "weft/probe/backend.h"
#include "weft/probe/reflector.h"

namespace weft::probe {

// One capture handle, and what it takes to open it again.
struct Reflector::PcapState {
  std::string dev, filter;
  pcap_t* p = nullptr;  // null while a broken capture waits to be reopened
  int link_offset = 0;

  Status open();  // closes the handle first; leaves none behind on failure
  Status activate();
  void close() {
    if (p) pcap_close(p);
    p = nullptr;
  }
  ~PcapState() { close(); }
};

void Reflector::PcapDeleter::operator()(PcapState* p) const { delete p; }

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kPollMs = 200;
// The wait before each attempt to reopen a broken capture doubles from
// kFirstRetry to kMaxRetry: a device gone for good costs one pcap_activate
// every 5 s, and one back in place is captured again within 5 s.
constexpr milliseconds kFirstRetry{100}, kMaxRetry{5000};

std::string device_for(uint32_t ip) {
  const std::string dev = ip == 0 ? "" : interface_of(ip);
  return dev.empty() ? "any" : dev;
}

// Waits up to `d` for stop(), whose eventfd stays readable once written;
// true when it came.
bool stop_within(int stop_fd, milliseconds d) {
  pollfd fd{stop_fd, POLLIN, 0};
  return ::poll(&fd, 1, static_cast<int>(d.count())) > 0;
}

}  // namespace

Status Reflector::start_pcap() {
  pcap_.reset(new PcapState());
  pcap_->dev = cfg_.pcap_device.empty() ? device_for(cfg_.bind_ip) : cfg_.pcap_device;
  pcap_->filter = fmt::format("tcp dst port {} and tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn", cfg_.tcp_port);
  if (cfg_.bind_ip) {
    pcap_->filter += fmt::format(" and dst host {}.{}.{}.{}", cfg_.bind_ip >> 24, (cfg_.bind_ip >> 16) & 0xff,
                                 (cfg_.bind_ip >> 8) & 0xff, cfg_.bind_ip & 0xff);
  }
  WEFT_RETURN_IF_ERROR(pcap_->open());
  pcap_thread_ = std::thread([this] { pcap_loop(); });
  return ok_status();
}

Status Reflector::PcapState::open() {
  close();
  Status st = activate();
  if (!st) close();
  return st;
}

Status Reflector::PcapState::activate() {
  char err[PCAP_ERRBUF_SIZE] = {};
  p = pcap_create(dev.c_str(), err);
  if (!p) return unavailable(fmt::format("pcap on {}: {}", dev, err));
  pcap_set_snaplen(p, 256);
  pcap_set_immediate_mode(p, 1);  // deliver each SYN now, not when a buffer fills
  pcap_set_buffer_size(p, 8 << 20);
  const int rc = pcap_activate(p);
  if (rc < 0) {
    return Status(rc == PCAP_ERROR_PERM_DENIED ? StatusCode::kPermissionDenied : StatusCode::kUnavailable,
                  fmt::format("pcap on {}: {} (TCP-SYN probes need CAP_NET_RAW)", dev, pcap_geterr(p)));
  }
  switch (pcap_datalink(p)) {
    case DLT_EN10MB: link_offset = 14; break;
    case DLT_LINUX_SLL: link_offset = 16; break;
    case DLT_LINUX_SLL2: link_offset = 20; break;
    case DLT_RAW: link_offset = 0; break;
    default: return unavailable(fmt::format("pcap on {}: unsupported link type {}", dev, pcap_datalink(p)));
  }
  pcap_setdirection(p, PCAP_D_IN);
  bpf_program prog{};
  if (pcap_compile(p, &prog, filter.c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0 || pcap_setfilter(p, &prog) != 0) {
    pcap_freecode(&prog);
    return internal_error(fmt::format("pcap filter '{}': {}", filter, pcap_geterr(p)));
  }
  pcap_freecode(&prog);
  if (pcap_setnonblock(p, 1, err) != 0) return internal_error(fmt::format("pcap_setnonblock: {}", err));
  return ok_status();
}

void Reflector::stop_pcap() { pcap_.reset(); }

void Reflector::pcap_loop() {
  PcapState& s = *pcap_;
  milliseconds retry = kFirstRetry;
  Clock::time_point broke;
  int failures = 0, attempts = 0;
  int empty_errors = 0;  // POLLERR wake-ups in a row on which pcap_dispatch read nothing
  while (running_) {
    if (!s.p) {
      if (stop_within(stop_fd_.get(), retry)) continue;
      ++attempts;
      // The address may have moved to an interface of another name (a bond
      // or VLAN made again): the device is looked up again unless configured.
      if (cfg_.pcap_device.empty()) s.dev = device_for(cfg_.bind_ip);
      if (Status st = s.open(); !st) {
        // The first failed attempt says why at warn level (a device gone for
        // good needs the operator); the retries after it are quiet.
        if (attempts == 1) spdlog::warn("reflector: reopening the TCP-SYN capture: {}; retrying", st.message());
        else spdlog::debug("reflector: reopening the TCP-SYN capture: {}", st.message());
        retry = std::min(retry * 2, kMaxRetry);
        continue;
      }
      spdlog::info("reflector: TCP-SYN capture on {} resumed after {} ms ({} attempts)", s.dev,
                   std::chrono::duration_cast<milliseconds>(Clock::now() - broke).count(), attempts);
      continue;
    }
    pollfd fds[2] = {{pcap_get_selectable_fd(s.p), POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
    if (::poll(fds, 2, kPollMs) <= 0 || (fds[1].revents & POLLIN)) continue;
    // poll(2): POLLHUP and POLLNVAL say the socket is finished; POLLERR
    // says it holds an error, which pcap_dispatch reads (clearing it) and
    // judges. An error that stays set with nothing to read would wake poll
    // at once forever, so a second such wake-up in a row is a failure too.
    const short ev = fds[0].revents;
    std::string why;
    if (ev & (POLLHUP | POLLNVAL)) {
      why = fmt::format("poll(2) reported {}", ev & POLLNVAL ? "POLLNVAL" : "POLLHUP");
    } else {
      // pcap_dispatch(3PCAP): the number of packets processed, or
      // PCAP_ERROR with pcap_geterr saying why (PCAP_ERROR_BREAK only
      // after pcap_breakloop, which nothing here calls).
      const int n = pcap_dispatch(
          s.p, -1,
          [](u_char* self, const pcap_pkthdr* hdr, const u_char* bytes) {
            reinterpret_cast<Reflector*>(self)->handle_frame(bytes, hdr->caplen);
          },
          reinterpret_cast<u_char*>(this));
      flush_answers();
      empty_errors = (ev & POLLERR) && n == 0 ? empty_errors + 1 : 0;
      if (n < 0) why = pcap_geterr(s.p);
      else if (empty_errors >= 2) why = "poll(2) keeps reporting POLLERR and pcap_dispatch reads nothing";
    }
    if (why.empty()) continue;
    ++failures;
    spdlog::warn("reflector: TCP-SYN capture on {} failed ({}); reopening it, TCP-SYN probes go unanswered "
                 "meanwhile (failure {} since start)",
                 s.dev, why, failures);
    s.close();
    broke = Clock::now();
    retry = kFirstRetry;
    attempts = 0;
    empty_errors = 0;
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
