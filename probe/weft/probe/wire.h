// The probe packet (docs/probe.md; after the probe packet of ACCL, Dong et al., IEEE Micro 2021).
//
// A request leaves the sender with DSCP X; spine N rewrites it to X+N; the
// reflector reads the DSCP it received, and answers with DSCP Y carrying N and
// that DSCP in the payload. Every packet carries a truncated HMAC-SHA256 under
// the campaign's key, so forged, replayed or stale packets are counted by reason
// and dropped — never stored.
//
// Layout (48 bytes, network byte order, the UDP payload / TCP SYN data):
//   0 magic "WFPB"  4 version  5 type  6 flags  7 dscp_seen
//   8 campaign     12 sequence 16 sport 18 dport 20 spine 21 reserved
//  22 reply_port (0 = answer the packet's source port; TCP probes name a UDP port)
//  24 send_time_ns (sender's CLOCK_REALTIME)   32 mac[16] over bytes 0..31
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "weft/probe/mac.h"

namespace weft::probe {

inline constexpr uint32_t kProbeMagic = 0x57465042;  // "WFPB"
inline constexpr uint8_t kProbeVersion = 1;
inline constexpr uint8_t kSpineUnknown = 0xff;

enum class ProbeType : uint8_t { kRequest = 1, kReply = 2 };
// flags
inline constexpr uint8_t kFlagTcp = 0x01;  // the request was a TCP SYN (reply over UDP)
inline constexpr uint8_t kFlagTtl = 0x02;  // TTL method: the reflector's DSCP is not meaningful

// The decoded header, host byte order.
struct ProbeHeader {
  uint8_t version = kProbeVersion;
  ProbeType type = ProbeType::kRequest;
  uint8_t flags = 0;
  uint8_t dscp_seen = 0;
  uint32_t campaign = 0;
  uint32_t sequence = 0;
  uint16_t sport = 0;  // the probed 5-tuple's ports (a reply names its request)
  uint16_t dport = 0;
  uint8_t spine = kSpineUnknown;
  uint16_t reply_port = 0;
  uint64_t send_time_ns = 0;
};

// The on-the-wire image. Fields are byte arrays, so the struct has no padding
// and no alignment needs: its bytes ARE the packet (big-endian fields).
struct WireProbe {
  uint8_t magic[4];
  uint8_t version;
  uint8_t type;
  uint8_t flags;
  uint8_t dscp_seen;
  uint8_t campaign[4];
  uint8_t sequence[4];
  uint8_t sport[2];
  uint8_t dport[2];
  uint8_t spine;
  uint8_t reserved;
  uint8_t reply_port[2];
  uint8_t send_time_ns[8];
  uint8_t mac[16];
};
inline constexpr size_t kProbeSize = 48;
inline constexpr size_t kMacOffset = 32;
static_assert(sizeof(WireProbe) == kProbeSize, "probe layout is part of the protocol");
static_assert(alignof(WireProbe) == 1, "byte-array fields: no padding, any alignment");
static_assert(offsetof(WireProbe, campaign) == 8 && offsetof(WireProbe, sequence) == 12);
static_assert(offsetof(WireProbe, sport) == 16 && offsetof(WireProbe, spine) == 20);
static_assert(offsetof(WireProbe, reply_port) == 22);
static_assert(offsetof(WireProbe, send_time_ns) == 24, "64-bit field on an 8-byte boundary of the payload");
static_assert(offsetof(WireProbe, mac) == kMacOffset && kMacOffset + sizeof(WireProbe::mac) == kProbeSize);
static_assert(kProbeSize <= 1472, "fits one IPv4/UDP datagram on a 1500-byte MTU");

// Why a packet was dropped. Every receiver counts these; the names are stored
// in the database's rejections table.
enum class Reject : uint8_t {
  kTruncated,        // shorter than kProbeSize
  kBadMagic,
  kBadVersion,
  kBadType,          // a reply where a request was expected, or an unknown type
  kUnknownCampaign,  // no key for this campaign id
  kBadMac,           // forged, corrupted, or under another key
  kStale,            // send time outside the acceptance window
  kReplayed,         // a (campaign, sequence, source) seen before
  kUnexpected,       // a valid reply that matches no probe of this round
  kLate,             // a valid answer to a probe a retry already settled
  kCount
};
std::string_view reject_name(Reject r);

// Writes the packet (MAC included) into out; returns kProbeSize.
size_t encode_probe(const ProbeHeader& h, const MacKey& key, std::span<uint8_t, kProbeSize> out);

// Structural checks and header decode, without the MAC (the caller picks the
// key by the decoded campaign id). Returns false and sets *why on failure.
bool parse_probe(std::span<const uint8_t> packet, ProbeHeader* h, Reject* why);
// The MAC of a parsed packet under `key`.
bool verify_probe_mac(std::span<const uint8_t> packet, const MacKey& key);

uint64_t realtime_ns();

}  // namespace weft::probe
