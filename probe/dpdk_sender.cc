// The DPDK sender: probes leave through DPDK's af_packet poll-mode driver
// (net_af_packet vdev, PACKET_MMAP rings with the qdisc bypassed), so a sweep
// sends from user space in bursts without a socket or a syscall per port.
//
// The EAL starts once per process without hugepages or PCI (--no-huge
// --no-pci --no-shconf: no shared files; nothing pinned), its main
// lcore allowed on every CPU the process may use (EAL pins the main thread to
// its lcore's CPU set; rte_eal_init(3)). Each sender hot-plugs its own vdev on
// the interface that holds local_ip (rte_eal_hotplug_add), in the network namespace
// of the calling thread: the af_packet socket is made there.
//
// Frames are Ethernet / IPv4 (TOS = DSCP X << 2; TTL 2 for the TTL method) /
// UDP (sport from the window, dport the data port) / the 48-byte probe. The
// next hop is the kernel's: the interface's route to the destination
// (/proc/net/route, longest prefix) and its MAC from the kernel neighbour
// table (/proc/net/arp), else an ARP request of our own (RFC 826). The kernel
// keeps the address: it answers ARP for us, and one kernel UDP socket per
// window port reserves the port (as the udp backend's do) so that replies
// find a socket instead of drawing ICMP port-unreachable; the packet socket
// sees every frame, and we take the replies and ICMP time-exceeded messages
// to our address and window from it, through the same acceptance checks as
// every receiver (validate.h).
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_arp.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "weft/probe/backend.h"
#include "weft/probe/fd.h"
#include "weft/probe/validate.h"
#include "weft/common/ipv4.h"

namespace weft::probe {
namespace {

using Clock = std::chrono::steady_clock;

// EAL: once per process; its result is every later caller's too.
std::mutex g_dpdk_mu;  // device hot-plug and port setup are not thread-safe
Status g_eal_status = internal_error("DPDK EAL not started");
std::once_flag g_eal_once;

Status start_eal() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  std::vector<int> allowed;
  if (::sched_getaffinity(0, sizeof cpus, &cpus) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &cpus)) allowed.push_back(c);
    }
  }
  if (allowed.empty()) allowed.push_back(0);
  // --no-shconf: no shared config files (--in-memory cannot go with
  // --no-huge in DPDK 22.11); a per-process prefix names the runtime
  // directory, removed at exit.
  std::vector<std::string> args = {"weft-probe",  "--no-huge",      "--no-pci",
                                   "--no-shconf", fmt::format("--file-prefix=weft-probe-{}", ::getpid()),
                                   "-m",          "128",            "--no-telemetry",
                                   "--iova-mode=va", "--log-level=3", fmt::format("--lcores=0@({})", fmt::join(allowed, ","))};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) {
    return unavailable(fmt::format("DPDK EAL init failed ({}): it needs root (or CAP_SYS_ADMIN, CAP_NET_RAW) and "
                                   "128 MiB",
                                   rte_strerror(rte_errno)));
  }
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(rte_eal_get_runtime_dir(), ec);
  });
  return ok_status();
}

Status eal() {
  std::call_once(g_eal_once, [] { g_eal_status = start_eal(); });
  return g_eal_status;
}

// The kernel's next hop for dst on dev: longest matching prefix of
// /proc/net/route (proc(5); addresses as the kernel's native u32), the
// gateway if it has one (RTF_GATEWAY), else dst itself.
Result<uint32_t> next_hop(const std::string& dev, uint32_t dst) {
  std::ifstream in("/proc/thread-self/net/route");  // this thread's namespace (setns(2) is per thread)
  if (!in) return io_error("/proc/thread-self/net/route", errno);
  std::string line;
  std::getline(in, line);  // header
  int best_len = -1;
  uint32_t best = 0;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string iface;
    unsigned long d = 0, g = 0, flags = 0, mask = 0, refcnt = 0, use = 0, metric = 0;
    ls >> iface >> std::hex >> d >> g >> flags >> std::dec >> refcnt >> use >> metric >> std::hex >> mask;
    if (!ls || iface != dev || !(flags & 0x1)) continue;  // RTF_UP
    const uint32_t net = ntohl(static_cast<uint32_t>(d)), m = ntohl(static_cast<uint32_t>(mask));
    if ((dst & m) != net) continue;
    const int len = __builtin_popcount(m);
    if (len > best_len) best_len = len, best = (flags & 0x2) ? ntohl(static_cast<uint32_t>(g)) : dst;  // RTF_GATEWAY
  }
  if (best_len < 0) return unavailable(fmt::format("no route to {} on {}", ipv4_str(dst), dev));
  return best;
}

// The kernel neighbour table's entry for ip on dev (proc(5) /proc/net/arp),
// complete ones only (flags ATF_COM).
bool kernel_neighbour(const std::string& dev, uint32_t ip, rte_ether_addr* mac) {
  std::ifstream in("/proc/thread-self/net/arp");
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string addr, type, flags, hw, mask, iface;
    ls >> addr >> type >> flags >> hw >> mask >> iface;
    in_addr a{};
    if (iface != dev || ::inet_pton(AF_INET, addr.c_str(), &a) != 1 || ntohl(a.s_addr) != ip) continue;
    if (!(std::stoul(flags, nullptr, 16) & 0x2)) continue;  // ATF_COM
    unsigned b[6];
    if (std::sscanf(hw.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6) continue;
    for (int i = 0; i < 6; ++i) mac->addr_bytes[i] = static_cast<uint8_t>(b[i]);
    return true;
  }
  return false;
}

constexpr uint16_t kBurst = 32;
constexpr size_t kFrame = sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr) + sizeof(rte_udp_hdr) + kProbeSize;

class DpdkSender final : public SenderBackend {
 public:
  explicit DpdkSender(const SenderConfig& cfg) : cfg_(cfg) {}
  ~DpdkSender() override {
    std::lock_guard lock(g_dpdk_mu);
    if (started_) rte_eth_dev_stop(port_);
    if (configured_) rte_eth_dev_close(port_);
    if (probed_) rte_eal_hotplug_remove("vdev", name_.c_str());
    if (pool_) rte_mempool_free(pool_);
  }
  std::string_view name() const override { return "dpdk"; }

  Status init() {
    WEFT_RETURN_IF_ERROR(eal());
    if (cfg_.device.empty()) {
      dev_ = interface_of(cfg_.local_ip);
      if (dev_.empty()) return not_found(fmt::format("no interface holds {} (set the sender's device)", ipv4_str(cfg_.local_ip)));
    } else {
      dev_ = cfg_.device;
    }
    std::lock_guard lock(g_dpdk_mu);
    static std::atomic<int> serial{0};
    const int id = serial++;
    name_ = fmt::format("net_af_packet_weft{}", id);
    // One queue pair; the qdisc is bypassed (PACKET_QDISC_BYPASS): probes go
    // straight to the driver, as DPDK's own NIC drivers would.
    const std::string args = fmt::format("iface={},qpairs=1,qdisc_bypass=1,framecnt=2048", dev_);
    if (rte_eal_hotplug_add("vdev", name_.c_str(), args.c_str()) != 0) {
      return unavailable(fmt::format("DPDK af_packet on {}: {} (needs CAP_NET_RAW)", dev_, rte_strerror(rte_errno)));
    }
    probed_ = true;
    if (rte_eth_dev_get_port_by_name(name_.c_str(), &port_) != 0) return internal_error("DPDK: the new port has no id");
    pool_ = rte_pktmbuf_pool_create(fmt::format("weft_probe{}", id).c_str(), 4095, 256, 0,
                                    RTE_MBUF_DEFAULT_BUF_SIZE, static_cast<int>(rte_socket_id()));
    if (!pool_) return unavailable(fmt::format("DPDK mbuf pool: {}", rte_strerror(rte_errno)));
    rte_eth_conf conf{};
    if (rte_eth_dev_configure(port_, 1, 1, &conf) != 0) return unavailable("DPDK: configuring the af_packet port");
    configured_ = true;
    const int socket = rte_eth_dev_socket_id(port_);
    if (rte_eth_rx_queue_setup(port_, 0, 1024, static_cast<unsigned>(socket), nullptr, pool_) != 0 ||
        rte_eth_tx_queue_setup(port_, 0, 1024, static_cast<unsigned>(socket), nullptr) != 0) {
      return unavailable("DPDK: setting up the af_packet queues");
    }
    if (rte_eth_dev_start(port_) != 0) return unavailable(fmt::format("DPDK: starting the port on {}", dev_));
    started_ = true;
    if (rte_eth_macaddr_get(port_, &mac_) != 0) return unavailable("DPDK: the port has no MAC address");
    return ok_status();
  }

  Status open_ports(uint16_t first, uint16_t count) override {
    reserved_.clear();
    first_ = first;
    count_ = count;
    for (uint32_t i = 0; i < count; ++i) {
      const uint16_t port = static_cast<uint16_t>(first + i);
      UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!fd) return io_error("socket(UDP)", errno);
      set_rcvbuf(fd.get(), 4096);  // the replies we read from the packet socket pile up here: keep it small
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(port);
      a.sin_addr.s_addr = htonl(cfg_.local_ip);
      if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        return io_error(fmt::format("reserving probe source port {}:{}", ipv4_str(cfg_.local_ip), port), errno);
      }
      reserved_.push_back(std::move(fd));
    }
    return ok_status();
  }

  Status send(std::span<const ProbeSend> probes) override {
    std::array<rte_mbuf*, kBurst> burst;
    for (size_t at = 0; at < probes.size();) {
      uint16_t n = 0;
      for (; n < kBurst && at < probes.size(); ++at) {
        const ProbeSend& p = probes[at];
        if (p.sport < first_ || p.sport - first_ >= count_) {
          free_all(burst.data(), n);
          return failed_precondition(fmt::format("source port {} is outside the open window", p.sport));
        }
        auto hop = hop_mac(p.dst_ip);
        if (!hop) {
          free_all(burst.data(), n);
          return hop.status();
        }
        rte_mbuf* m = rte_pktmbuf_alloc(pool_);
        if (!m) {
          ++stats_.send_errors;  // pool exhausted: the ring still holds earlier frames
          continue;
        }
        build(m, p, *hop);
        burst[n++] = m;
      }
      uint16_t done = 0;
      for (int spins = 0; done < n && spins < 1000; ++spins) {
        done = static_cast<uint16_t>(done + rte_eth_tx_burst(port_, 0, burst.data() + done, static_cast<uint16_t>(n - done)));
      }
      stats_.sent += done;
      stats_.send_errors += n - done;
      free_all(burst.data() + done, static_cast<uint16_t>(n - done));
    }
    return ok_status();
  }

  Status poll(int timeout_ms, std::vector<ProbeAnswer>& out) override {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    const size_t before = out.size();
    for (;;) {
      const uint16_t got = receive(out);
      if (got == 0 && out.size() > before) return ok_status();  // drained after answers came
      // Also while frames keep coming: the packet socket sees all of the
      // interface's traffic, and a ring that never empties (a flood) must not
      // keep the campaign from its deadlines and a cancel (campaign.cc).
      if (Clock::now() >= deadline) return ok_status();
      if (got == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));  // poll mode, without burning a core
    }
  }

 private:
  static void free_all(rte_mbuf** m, uint16_t n) {
    for (uint16_t i = 0; i < n; ++i) rte_pktmbuf_free(m[i]);
  }

  void build(rte_mbuf* m, const ProbeSend& p, const rte_ether_addr& hop) {
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    eth->dst_addr = hop;
    eth->src_addr = mac_;
    eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
    ip->version_ihl = RTE_IPV4_VHL_DEF;
    ip->type_of_service = static_cast<uint8_t>(cfg_.probe_dscp << 2);
    ip->total_length = rte_cpu_to_be_16(sizeof(rte_ipv4_hdr) + sizeof(rte_udp_hdr) + kProbeSize);
    ip->packet_id = rte_cpu_to_be_16(ip_id_++);
    ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
    ip->time_to_live = cfg_.method == Method::kTtl ? cfg_.ttl : 64;
    ip->next_proto_id = IPPROTO_UDP;
    ip->src_addr = rte_cpu_to_be_32(cfg_.local_ip);
    ip->dst_addr = rte_cpu_to_be_32(p.dst_ip);
    ip->hdr_checksum = 0;
    auto* udp = reinterpret_cast<rte_udp_hdr*>(ip + 1);
    udp->src_port = rte_cpu_to_be_16(p.sport);
    udp->dst_port = rte_cpu_to_be_16(cfg_.dport);
    udp->dgram_len = rte_cpu_to_be_16(sizeof(rte_udp_hdr) + kProbeSize);
    udp->dgram_cksum = 0;
    ProbeHeader h;
    h.type = ProbeType::kRequest;
    h.flags = cfg_.method == Method::kTtl ? kFlagTtl : 0;
    h.campaign = cfg_.run;
    h.sequence = p.sequence;
    h.sport = p.sport;
    h.dport = cfg_.dport;
    h.send_time_ns = realtime_ns();
    h.tuple = {.src_ip = cfg_.local_ip, .dst_ip = p.dst_ip, .proto = IPPROTO_UDP, .sport = p.sport,
               .dport = cfg_.dport};
    encode_probe(h, cfg_.key, std::span<uint8_t, kProbeSize>(reinterpret_cast<uint8_t*>(udp + 1), kProbeSize));
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);  // RFC 768: a sum the receiver's stack checks
    m->data_len = m->pkt_len = kFrame;
  }

  // The MAC of dst's next hop, resolved once per next hop.
  Result<rte_ether_addr> hop_mac(uint32_t dst) {
    if (auto it = hop_of_.find(dst); it != hop_of_.end()) return it->second;
    WEFT_ASSIGN_OR_RETURN(const uint32_t hop, next_hop(dev_, dst));
    rte_ether_addr mac{};
    if (auto it = arp_.find(hop); it != arp_.end()) {
      mac = it->second;
    } else if (kernel_neighbour(dev_, hop, &mac)) {
      arp_[hop] = mac;
    } else {
      WEFT_ASSIGN_OR_RETURN(mac, arp_resolve(hop));
    }
    hop_of_[dst] = mac;
    return mac;
  }

  // RFC 826 request from our MAC and address; the reply comes back through
  // receive(), which files it in arp_.
  Result<rte_ether_addr> arp_resolve(uint32_t ip) {
    std::vector<ProbeAnswer> early;  // answers that arrive meanwhile are kept for the next poll
    for (int attempt = 0; attempt < 3; ++attempt) {
      rte_mbuf* m = rte_pktmbuf_alloc(pool_);
      if (!m) return unavailable("DPDK mbuf pool exhausted while resolving a next hop");
      auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
      std::memset(&eth->dst_addr, 0xff, sizeof eth->dst_addr);
      eth->src_addr = mac_;
      eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
      auto* arp = reinterpret_cast<rte_arp_hdr*>(eth + 1);
      arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
      arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
      arp->arp_hlen = RTE_ETHER_ADDR_LEN;
      arp->arp_plen = 4;
      arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
      arp->arp_data.arp_sha = mac_;
      arp->arp_data.arp_sip = rte_cpu_to_be_32(cfg_.local_ip);
      std::memset(&arp->arp_data.arp_tha, 0, sizeof arp->arp_data.arp_tha);
      arp->arp_data.arp_tip = rte_cpu_to_be_32(ip);
      m->data_len = m->pkt_len = sizeof(rte_ether_hdr) + sizeof(rte_arp_hdr);
      if (rte_eth_tx_burst(port_, 0, &m, 1) != 1) rte_pktmbuf_free(m);
      const auto deadline = Clock::now() + std::chrono::milliseconds(300);
      while (Clock::now() < deadline) {
        if (receive(pending_) == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
        if (auto it = arp_.find(ip); it != arp_.end()) return it->second;
      }
    }
    return unavailable(fmt::format("no ARP reply from next hop {} on {}", ipv4_str(ip), dev_));
  }

  // One rx burst: files ARP replies, appends valid probe answers. Returns
  // the frames read.
  uint16_t receive(std::vector<ProbeAnswer>& out) {
    if (!pending_.empty() && &out != &pending_) {
      out.insert(out.end(), pending_.begin(), pending_.end());
      pending_.clear();
    }
    std::array<rte_mbuf*, kBurst> rx;
    const uint16_t n = rte_eth_rx_burst(port_, 0, rx.data(), kBurst);
    const uint64_t now = realtime_ns();
    for (uint16_t i = 0; i < n; ++i) {
      handle(rte_pktmbuf_mtod(rx[i], const uint8_t*), rte_pktmbuf_data_len(rx[i]), now, out);
      rte_pktmbuf_free(rx[i]);
    }
    return n;
  }

  void handle(const uint8_t* f, size_t len, uint64_t now, std::vector<ProbeAnswer>& out) {
    if (len < sizeof(rte_ether_hdr)) return;
    rte_ether_hdr eth;
    std::memcpy(&eth, f, sizeof eth);
    if (rte_is_same_ether_addr(&eth.src_addr, &mac_)) return;  // our own frames, looped to the packet socket
    const uint16_t type = rte_be_to_cpu_16(eth.ether_type);
    f += sizeof eth, len -= sizeof eth;
    if (type == RTE_ETHER_TYPE_ARP && len >= sizeof(rte_arp_hdr)) {
      rte_arp_hdr arp;
      std::memcpy(&arp, f, sizeof arp);
      if (rte_be_to_cpu_16(arp.arp_opcode) == RTE_ARP_OP_REPLY &&
          rte_be_to_cpu_32(arp.arp_data.arp_tip) == cfg_.local_ip) {
        arp_[rte_be_to_cpu_32(arp.arp_data.arp_sip)] = arp.arp_data.arp_sha;
      }
      return;
    }
    if (type != RTE_ETHER_TYPE_IPV4) return;
    const Ip4 ip = ip4(f, len);
    if (!ip.ok || ip.dst != cfg_.local_ip) return;
    if (ip.proto == IPPROTO_UDP && ip.len >= sizeof(rte_udp_hdr)) {
      rte_udp_hdr udp;
      std::memcpy(&udp, ip.payload, sizeof udp);
      const uint16_t sport = rte_be_to_cpu_16(udp.dst_port);
      if (sport < first_ || sport - first_ >= count_) return;  // not a probe port: the kernel's traffic
      ProbeHeader h;
      const FiveTuple seen{.src_ip = ip.src, .dst_ip = ip.dst, .proto = IPPROTO_UDP,
                           .sport = rte_be_to_cpu_16(udp.src_port), .dport = sport};
      if (!accept_reply({ip.payload + sizeof udp, ip.len - sizeof udp}, seen, cfg_.run, cfg_.key, ProbeType::kReply,
                        stats_, &h)) {
        return;
      }
      if (h.sport != sport) {
        stats_.reject(Reject::kUnexpected);  // a valid reply for another port
        return;
      }
      ProbeAnswer a;
      a.sequence = h.sequence;
      a.dst_ip = ip.src;
      a.sport = sport;
      a.dscp_seen = h.dscp_seen;
      a.spine = spine_of_answer(h.dscp_seen, cfg_.probe_dscp);
      a.rtt_ns = now > h.send_time_ns ? now - h.send_time_ns : 0;
      out.push_back(a);
    } else if (ip.proto == IPPROTO_ICMP && cfg_.method == Method::kTtl && ip.len >= sizeof(rte_icmp_hdr)) {
      // Time exceeded (RFC 792 type 11) quoting our request: IP header, UDP
      // header, and (Linux quotes up to 576 bytes) the probe with its MAC.
      if (ip.payload[0] != 11) return;
      const uint8_t* q = ip.payload + 8;
      const Ip4 inner = ip4(q, ip.len - 8);
      if (!inner.ok || inner.src != cfg_.local_ip || inner.proto != IPPROTO_UDP || inner.len < sizeof(rte_udp_hdr)) {
        return;
      }
      rte_udp_hdr udp;
      std::memcpy(&udp, inner.payload, sizeof udp);
      const uint16_t sport = rte_be_to_cpu_16(udp.src_port);
      if (sport < first_ || sport - first_ >= count_) return;
      ProbeHeader h;
      const FiveTuple quoted{.src_ip = inner.src, .dst_ip = inner.dst, .proto = IPPROTO_UDP, .sport = sport,
                             .dport = rte_be_to_cpu_16(udp.dst_port)};
      if (!accept_reply({inner.payload + sizeof udp, inner.len - sizeof udp}, quoted, cfg_.run, cfg_.key,
                        ProbeType::kRequest, stats_, &h)) {
        return;
      }
      ProbeAnswer a;
      a.sequence = h.sequence;
      a.dst_ip = inner.dst;
      a.sport = sport;
      a.hop_ip = ip.src;
      a.rtt_ns = now > h.send_time_ns ? now - h.send_time_ns : 0;
      out.push_back(a);
    }
  }

  struct Ip4 {
    bool ok = false;
    uint32_t src = 0, dst = 0;
    uint8_t proto = 0;
    const uint8_t* payload = nullptr;
    size_t len = 0;  // payload bytes present (IP total length, capped by what arrived)
  };
  static Ip4 ip4(const uint8_t* p, size_t len) {
    Ip4 r;
    if (len < sizeof(rte_ipv4_hdr)) return r;
    rte_ipv4_hdr h;
    std::memcpy(&h, p, sizeof h);
    const size_t ihl = static_cast<size_t>(h.version_ihl & 0x0f) * 4;
    const size_t total = rte_be_to_cpu_16(h.total_length);
    if ((h.version_ihl >> 4) != 4 || ihl < sizeof h || total < ihl || len < ihl) return r;
    r.ok = true;
    r.src = rte_be_to_cpu_32(h.src_addr);
    r.dst = rte_be_to_cpu_32(h.dst_addr);
    r.proto = h.next_proto_id;
    r.payload = p + ihl;
    r.len = std::min(total, len) - ihl;
    return r;
  }

  SenderConfig cfg_;
  std::string dev_, name_;
  uint16_t port_ = 0;
  rte_mempool* pool_ = nullptr;
  bool probed_ = false, configured_ = false, started_ = false;
  rte_ether_addr mac_{};
  std::vector<UniqueFd> reserved_;
  uint16_t first_ = 0, count_ = 0;
  uint16_t ip_id_ = 0;
  std::map<uint32_t, rte_ether_addr> arp_;     // next hop -> MAC
  std::map<uint32_t, rte_ether_addr> hop_of_;  // destination -> its next hop's MAC
  std::vector<ProbeAnswer> pending_;           // answers read while resolving ARP
};

}  // namespace

Status dpdk_available() { return eal(); }

Result<std::unique_ptr<SenderBackend>> make_dpdk_sender(const SenderConfig& cfg) {
  auto s = std::make_unique<DpdkSender>(cfg);
  WEFT_RETURN_IF_ERROR(s->init());
  return std::unique_ptr<SenderBackend>(std::move(s));
}

}  // namespace weft::probe
