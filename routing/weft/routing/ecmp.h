// ECMP hash models: which next hop a switch gives a 5-tuple.
//
// A switch with n equal-cost next hops computes a hash of the packet's
// 5-tuple and maps it to one of them. Models:
//   crc32   a CRC32 over (src IP, dst IP, proto, sport, dport) with a
//           per-switch seed mixed in, as merchant silicon does
//           (the seed is the switch's "hash seed" knob).
// Models are deterministic for a given seed, so a simulated fabric behaves
// the same on every run; tests/routing pins their values.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

namespace weft::routing {

struct FiveTuple {
  uint32_t src_ip = 0;  // host byte order
  uint32_t dst_ip = 0;
  uint8_t proto = 17;   // 17 UDP (RoCEv2), 6 TCP
  uint16_t sport = 0;
  uint16_t dport = 4791;
  friend bool operator==(const FiveTuple&, const FiveTuple&) = default;
};

inline constexpr uint16_t kRoceV2Port = 4791;

class EcmpHash {
 public:
  virtual ~EcmpHash() = default;
  virtual std::string_view name() const = 0;
  // Hash of the tuple at switch `sw` (switch index in the fabric).
  virtual uint32_t hash(const FiveTuple& t, int sw) const = 0;
  // The next hop of n: Linux and most ASICs map the hash onto n equal ranges
  // of the 32-bit space (hash-threshold, RFC 2992), not hash % n.
  size_t pick(const FiveTuple& t, int sw, size_t n) const {
    return static_cast<size_t>((static_cast<uint64_t>(hash(t, sw)) * n) >> 32);
  }
};

std::unique_ptr<EcmpHash> make_crc32_hash(uint32_t seed);

}  // namespace weft::routing
