// The reflector: the data-plane half of every agent. It answers each valid probe
// request with a reply that names the DSCP it received (and so the spine), and
// counts — never answers — anything forged, stale, replayed or malformed.
//
//   KeyRing keys;                       // the control plane adds campaign keys
//   Reflector r(keys, {.udp_port = 4791});
//   WEFT_RETURN_IF_ERROR(r.start());    // threads: UDP (+ pcap for TCP SYN probes)
//   ...
//   ProbeStats s = r.stats();
//   r.stop();                           // also in the destructor
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "weft/probe/fd.h"
#include "weft/probe/stats.h"
#include "weft/probe/validate.h"

namespace weft::probe {

struct ReflectorConfig {
  uint32_t bind_ip = 0;      // host order; 0 = any
  uint16_t udp_port = 4791;  // UDP probes arrive here; TCP probes are answered from here
  uint8_t probe_dscp = 8;    // X: the reply's spine field (senders read dscp_seen with their campaign's X instead)
  uint8_t reply_dscp = 4;    // Y, the DSCP of answers (never rewritten by spines)
  uint16_t tcp_port = 0;     // > 0: capture TCP SYN probes to this port (libpcap)
  std::string pcap_device;   // "" = the interface that holds bind_ip, else "any"
  AcceptOptions accept;
};

class Reflector {
 public:
  Reflector(const KeyRing& keys, ReflectorConfig cfg);
  ~Reflector();
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  Status start();
  void stop();
  ProbeStats stats() const;
  uint16_t udp_port() const { return bound_port_; }

  // One-way evidence for monitoring (monitor.h): the valid requests of a
  // campaign this reflector received, per source address and port. A round
  // trip that fails while its requests still arrive lost its replies: only
  // the reflector can tell the two directions of a path apart. Counting
  // starts at track_arrivals and ends at untrack_arrivals; at most
  // kMaxTrackedSources sources are counted per campaign (more are ignored).
  static constexpr size_t kMaxTrackedSources = 65536;
  void track_arrivals(uint32_t campaign);
  void untrack_arrivals(uint32_t campaign);
  // (source address, source port) -> requests received.
  std::map<std::pair<uint32_t, uint16_t>, uint64_t> arrivals(uint32_t campaign) const;

 private:
  void udp_loop();
  Status start_pcap();
  void stop_pcap();
  void pcap_loop();
  void handle_frame(const uint8_t* data, size_t caplen);
  // Queues the reply to `req`, which arrived at local address `at_ip`: the
  // reply leaves from there (IP_PKTINFO) and from udp_port, to to_ip:to_port.
  void answer(const ProbeHeader& req, uint8_t dscp_seen, uint32_t at_ip, uint32_t to_ip, uint16_t to_port);
  void flush_answers();

  const KeyRing& keys_;
  ReflectorConfig cfg_;
  UniqueFd udp_;
  UniqueFd stop_fd_;  // eventfd: wakes the loops for stop()
  uint16_t bound_port_ = 0;
  mutable std::mutex mu_;  // guards stats_ and the acceptors (both loops write)
  ProbeStats stats_;
  std::unique_ptr<RequestAcceptor> acceptor_;
  std::map<uint32_t, std::map<std::pair<uint32_t, uint16_t>, uint64_t>> arrivals_;  // guarded by mu_
  struct Outgoing {
    std::array<uint8_t, kProbeSize> buf;
    sockaddr_in to;
    alignas(cmsghdr) std::array<uint8_t, CMSG_SPACE(sizeof(in_pktinfo))> ctl;  // the source address
  };
  std::mutex out_mu_;  // answers queued by either loop, sent by flush_answers
  std::vector<Outgoing> out_;
  std::atomic<bool> running_{false};
  std::thread udp_thread_, pcap_thread_;
  struct PcapState;
  struct PcapDeleter {
    void operator()(PcapState* p) const;  // defined beside PcapState (reflector_pcap.cc)
  };
  std::unique_ptr<PcapState, PcapDeleter> pcap_;
};

}  // namespace weft::probe
