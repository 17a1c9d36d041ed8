// ECMP hash models: which next hop a switch gives a 5-tuple.
//
// A switch with n equal-cost next hops computes a hash of the packet's
// 5-tuple and maps it to one of them. Models:
//   crc32     a CRC32 (IEEE 802.3) over src IP, dst IP, proto, dport, a
//             per-switch seed and sport, as merchant silicon hashes header
//             fields (the seed is the switch's "hash seed" knob), each
//             switch reading its own bits of the CRC (a per-device hash
//             offset): CRCs are affine over GF(2), so two switches' CRCs of
//             one tuple differ by a constant, and equal bit selections would
//             tie one tier's choice to the previous one's (polarisation).
//   linux-l4  Linux's IPv4 multipath hash, fib_multipath_hash_policy=1 (or
//             policy 3 with fields 0x37): SipHash-2-4 over the flow keys
//             (proto, ports, addresses), the key built from
//             net.ipv4.fib_multipath_hash_seed, the 31-bit result mapped by
//             hash-threshold (net/ipv4/route.c fib_multipath_hash,
//             net/ipv4/fib_semantics.c fib_select_multipath). The kernel
//             orders the addresses (and ports) before hashing
//             (__flow_hash_consistentify), so a->b and b->a hash alike, and
//             every router of a fabric with one seed hashes a flow the same
//             way — consecutive tiers are correlated (hash polarisation).
//   linux-l3  the same with policy 0: addresses only, so every source port of
//             a host pair takes the same path and no port choice can help.
//   crc32-qp  E-ECMP (Gangidi et al., "RDMA over Ethernet for Distributed AI
//             Training at Meta Scale", SIGCOMM 2024, section 5): the crc32
//             model also over the 24-bit Destination QP of the RoCEv2 Base
//             Transport Header (IBTA spec vol. 1 9.2, BTH bytes 5-7, read by
//             the switch's user-defined hash fields for UDP dport 4791),
//             after sport. A flow's path is then f(5-tuple, dest QPN): a
//             collective that spreads a connection over several QPs spreads
//             it over several paths, and a plan must name the QP as well as
//             the port. The other models ignore FiveTuple::dqpn.
// The Linux models follow the kernel's structure, not its exact byte layout
// of struct flow_keys: they predict the behaviour (uniform, symmetric,
// seed-stable), not the spine a given kernel picks.
// Models are deterministic for a given seed, so a simulated fabric behaves
// the same on every run; tests/routing pins their values. A hash object is
// not thread-safe (crc32 memoises the CRC of a pair's fixed fields); give
// each thread its own.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "weft/common/status.h"

namespace weft::routing {

struct FiveTuple {
  uint32_t src_ip = 0;  // host byte order
  uint32_t dst_ip = 0;
  uint8_t proto = 17;   // 17 UDP (RoCEv2), 6 TCP
  uint16_t sport = 0;
  uint16_t dport = 4791;
  uint32_t dqpn = 0;    // RoCEv2 BTH Destination QP (24 bits); 0 when not RoCE
  friend bool operator==(const FiveTuple&, const FiveTuple&) = default;
};

inline constexpr uint16_t kRoceV2Port = 4791;
inline constexpr uint8_t kProtoTcp = 6;
inline constexpr uint8_t kProtoUdp = 17;
// QPNs are 24 bits; 0 and 1 are the special QPs (SMI, GSI), never a RoCE
// data QP (IBTA spec vol. 1 10.2.4).
inline constexpr uint32_t kMinDataQpn = 2;
inline constexpr uint32_t kMaxQpn = 0xFFFFFF;

class EcmpHash {
 public:
  virtual ~EcmpHash() = default;
  virtual std::string_view name() const = 0;
  // True when the hash reads FiveTuple::dqpn (E-ECMP).
  virtual bool hashes_qpn() const { return false; }
  // Hash of the tuple at switch `sw` (switch index in the fabric).
  virtual uint32_t hash(const FiveTuple& t, int sw) const = 0;
  // The next hop of n: Linux and most ASICs map the hash onto n equal ranges
  // of the 32-bit space (hash-threshold, RFC 2992), not hash % n.
  size_t pick(const FiveTuple& t, int sw, size_t n) const {
    return static_cast<size_t>((static_cast<uint64_t>(hash(t, sw)) * n) >> 32);
  }
  // pick() for many source ports of one tuple at one switch: picks[i] is
  // pick(t with sport = sports[i] and, when dqpns is not empty, dqpn =
  // dqpns[i], sw, n). A path table asks this for the 64 ports of a pair at
  // its source leaf; models whose per-pair work can be shared (crc32's fixed
  // fields) override it.
  virtual void pick_sports(const FiveTuple& t, int sw, size_t n, std::span<const uint16_t> sports,
                           std::span<uint16_t> picks, std::span<const uint32_t> dqpns = {}) const {
    FiveTuple u = t;
    for (size_t i = 0; i < sports.size(); ++i) {
      u.sport = sports[i];
      if (!dqpns.empty()) u.dqpn = dqpns[i];
      picks[i] = static_cast<uint16_t>(pick(u, sw, n));
    }
  }
  // pick() for many (switch, next-hop count, source port) of one tuple:
  // picks[i] is pick(t with sport = sports[i] and, when dqpns is not empty,
  // dqpn = dqpns[i], sws[i], ns[i]). A path table asks this for a pair's
  // ports spread over the switches of one tier.
  virtual void pick_each(const FiveTuple& t, std::span<const int> sws, std::span<const uint16_t> ns,
                         std::span<const uint16_t> sports, std::span<uint16_t> picks,
                         std::span<const uint32_t> dqpns = {}) const {
    FiveTuple u = t;
    for (size_t i = 0; i < sports.size(); ++i) {
      u.sport = sports[i];
      if (!dqpns.empty()) u.dqpn = dqpns[i];
      picks[i] = static_cast<uint16_t>(pick(u, sws[i], ns[i]));
    }
  }
};

enum class LinuxHashPolicy { kL3 = 0, kL4 = 1 };

std::unique_ptr<EcmpHash> make_crc32_hash(uint32_t seed);
std::unique_ptr<EcmpHash> make_crc32_qp_hash(uint32_t seed);  // E-ECMP
std::unique_ptr<EcmpHash> make_linux_hash(uint32_t seed, LinuxHashPolicy policy);

// "crc32", "crc32-qp", "linux-l4" or "linux-l3"; anything else is an error naming the models.
Result<std::unique_ptr<EcmpHash>> make_hash(std::string_view model, uint32_t seed);
inline constexpr std::string_view kHashModels = "crc32, crc32-qp, linux-l4, linux-l3";

namespace internal {
// SipHash-2-4 of `len` bytes with key (k0, k1), the words read little-endian
// (exposed for its reference test vector).
uint64_t siphash24(const uint8_t* data, size_t len, uint64_t k0, uint64_t k1);
}  // namespace internal

}  // namespace weft::routing
