// Probe senders and reflectors behind one small interface (STYLE.md: backends
// under one interface with one stats struct).
//
// A SenderBackend sends probes of one campaign from a window of source ports and
// returns the answers it validated; the campaign runner (campaign.h) owns
// sequencing, pacing, timeouts and retries. Backends:
//   udp      kernel UDP sockets, one per source port: IP_TOS for the DSCP, TTL=2
//            plus IP_RECVERR for the TTL method, sendmmsg/recvmmsg batches
//            (socket.cc). Needs no privilege.
//   tcp-syn  raw-socket TCP SYNs to the data port (ECMP hashes protocol 6 and
//            its ports, so UDP probes do not predict TCP flows); the reflector
//            captures them with libpcap and answers over UDP (tcp_syn.cc).
//            Needs CAP_NET_RAW on both ends.
//   dpdk     DPDK's af_packet poll-mode driver on the interface that holds
//            local_ip (or `device`): frames built and sent in user space in
//            bursts, replies read from the same ring (dpdk_sender.cc). Optional
//            build (-DWEFT_WITH_DPDK); needs root (CAP_NET_RAW, CAP_SYS_ADMIN
//            for the EAL), no hugepages.
//
//   SenderConfig cfg{...};
//   WEFT_ASSIGN_OR_RETURN(auto tx, make_sender("udp", cfg));
//   WEFT_RETURN_IF_ERROR(tx->open_ports(49152, 64));
//   WEFT_RETURN_IF_ERROR(tx->send(batch));
//   std::vector<ProbeAnswer> got;
//   WEFT_RETURN_IF_ERROR(tx->poll(10, got));
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/probe/stats.h"

namespace weft::probe {

enum class Method { kDscp, kTtl };
std::string_view method_name(Method m);
Result<Method> parse_method(std::string_view s);

struct SenderConfig {
  Method method = Method::kDscp;
  uint32_t local_ip = 0;     // host byte order; the sender binds its ports to it
  uint16_t dport = 4791;     // the data port whose paths we want (RoCEv2 4791)
  uint8_t probe_dscp = 8;    // X: spine N rewrites X -> X+N
  uint8_t ttl = 2;           // TTL method: expires at the first spine
  uint32_t run = 0;          // the campaign's wire id (campaign field)
  MacKey key;                // the campaign key
  uint16_t reply_port = 0;   // tcp-syn: UDP port the answers come back to (0 = pick)
  std::string device;        // dpdk / raw backends: interface name
};

struct ProbeSend {
  uint32_t dst_ip = 0;  // host byte order
  uint16_t sport = 0;
  uint32_t sequence = 0;
};

struct ProbeAnswer {
  uint32_t sequence = 0;
  uint32_t dst_ip = 0;      // the probed destination
  uint16_t sport = 0;
  int dscp_seen = -1;       // DSCP at the reflector; -1 = not reached (TTL method)
  int spine = -1;           // from dscp_seen and the campaign's X (spine_of_answer): 0 = same leaf; -1 = unknown
  uint32_t hop_ip = 0;      // TTL method: source of the ICMP time-exceeded
  uint64_t rtt_ns = 0;
};

class SenderBackend {
 public:
  virtual ~SenderBackend() = default;
  virtual std::string_view name() const = 0;
  // Makes [first, first+count) the ports probes may be sent from (closing the
  // previous window). Fails naming the port if one is taken.
  virtual Status open_ports(uint16_t first, uint16_t count) = 0;
  // Queues every probe; a probe the kernel refuses is counted in send_errors.
  virtual Status send(std::span<const ProbeSend> probes) = 0;
  // Waits up to timeout_ms for answers and appends the valid ones.
  virtual Status poll(int timeout_ms, std::vector<ProbeAnswer>& out) = 0;
  const ProbeStats& stats() const { return stats_; }

 protected:
  ProbeStats stats_;
};

// backend: "udp", "tcp-syn" or "dpdk".
Result<std::unique_ptr<SenderBackend>> make_sender(std::string_view backend, const SenderConfig& cfg);

// Whether this process can use the dpdk backend: OK once DPDK's EAL runs;
// Unimplemented when weft was built without DPDK, Unavailable when the EAL
// cannot start (no privilege, no memory). Each message says why and what to do.
Status dpdk_available();

// The interface that holds IPv4 address ip (host order) in the calling
// thread's network namespace, "" if none (getifaddrs(3)).
std::string interface_of(uint32_t ip);

// The spine a received DSCP names, given the probe's X: 0 when it is X (no spine
// crossed), N when X+N, kSpineUnknown otherwise.
uint8_t spine_from_dscp(uint8_t dscp_seen, uint8_t probe_dscp);

// A sender's reading of a reply (ProbeAnswer::spine): spine_from_dscp of the
// DSCP the reflector saw and the X this campaign's probes left with, -1 when
// it names none. The reply's own spine field is the reflector's reading with
// the reflector's X (`weft agent --probe-dscp`), which need not be the
// campaign's (`weft probe --probe-dscp`): every sender ignores it.
int spine_of_answer(uint8_t dscp_seen, uint8_t probe_dscp);

}  // namespace weft::probe
