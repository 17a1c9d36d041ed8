// The probe packet (docs/probe.md; after the probe packet of ACCL, Dong et al., IEEE Micro 2021).
//
// A request leaves the sender with DSCP X; spine N rewrites it to X+N; the
// reflector reads the DSCP it received, and answers with DSCP Y carrying N and
// that DSCP in the payload. Every packet carries a truncated HMAC-SHA256 under
// the campaign's key over its header AND its own 5-tuple (addresses, ports,
// protocol) as its sender put them on the wire, so forged, re-addressed,
// replayed or stale packets are counted by reason and dropped — never stored.
// On a NAT-free fabric the receiver sees exactly that 5-tuple; what spines
// rewrite (DSCP, TTL) stays outside the MAC.
//
// Layout (64 bytes, network byte order, the UDP payload / TCP SYN data):
//   0 magic "WFPB"  4 version (2)  5 type  6 flags  7 dscp_seen
//   8 campaign     12 sequence 16 sport 18 dport (the probed 5-tuple's ports)
//  20 spine (the reflector's reading with its own X; senders recompute it from
//     dscp_seen and their campaign's X, backend.h spine_of_answer)
//  21 protocol (this packet's: 17 UDP, 6 TCP)
//  22 reply_port (0 = answer the packet's source port; TCP probes name a UDP port)
//  24 send_time_ns (sender's CLOCK_REALTIME)
//  32 src_ip  36 dst_ip  40 src_port  42 dst_port (this packet's own, as sent)
//  44 reserved (zero)   48 mac[16] over bytes 0..47
// Version 1 (48 bytes, MAC over the header only) is rejected as bad_version.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "weft/probe/mac.h"
#include "weft/routing/ecmp.h"

namespace weft::probe {

inline constexpr uint32_t kProbeMagic = 0x57465042;  // "WFPB"
inline constexpr uint8_t kProbeVersion = 2;
inline constexpr uint8_t kSpineUnknown = 0xff;

enum class ProbeType : uint8_t { kRequest = 1, kReply = 2 };
// flags
inline constexpr uint8_t kFlagTcp = 0x01;  // the request was a TCP SYN (reply over UDP)
inline constexpr uint8_t kFlagTtl = 0x02;  // TTL method: the reflector's DSCP is not meaningful

using routing::FiveTuple;

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
  // This packet's own addresses, ports and protocol as its sender put them on
  // the wire (a reply's are the reflector's address and port towards the
  // sender's). MAC-covered; every receiver compares them with what it saw.
  FiveTuple tuple;
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
  uint8_t protocol;
  uint8_t reply_port[2];
  uint8_t send_time_ns[8];
  uint8_t src_ip[4];
  uint8_t dst_ip[4];
  uint8_t src_port[2];
  uint8_t dst_port[2];
  uint8_t reserved[4];
  uint8_t mac[16];
};
inline constexpr size_t kProbeSize = 64;
inline constexpr size_t kMacOffset = 48;
inline constexpr size_t kProbePrefix = 8;  // magic and version: enough to name another version
static_assert(sizeof(WireProbe) == kProbeSize, "probe layout is part of the protocol");
static_assert(alignof(WireProbe) == 1, "byte-array fields: no padding, any alignment");
static_assert(offsetof(WireProbe, campaign) == 8 && offsetof(WireProbe, sequence) == 12);
static_assert(offsetof(WireProbe, sport) == 16 && offsetof(WireProbe, spine) == 20);
static_assert(offsetof(WireProbe, reply_port) == 22);
static_assert(offsetof(WireProbe, send_time_ns) == 24, "64-bit field on an 8-byte boundary of the payload");
static_assert(offsetof(WireProbe, src_ip) == 32 && offsetof(WireProbe, src_port) == 40);
static_assert(offsetof(WireProbe, mac) == kMacOffset && kMacOffset + sizeof(WireProbe::mac) == kProbeSize);
static_assert(kProbeSize <= 1472, "fits one IPv4/UDP datagram on a 1500-byte MTU");

// Why a packet was dropped. Every receiver counts these; the names are stored
// in the database's rejections table.
enum class Reject : uint8_t {
  kTruncated,        // shorter than kProbeSize
  kBadMagic,
  kBadVersion,       // another wire version (version 1 included)
  kBadType,          // a reply where a request was expected, or an unknown type
  kUnknownCampaign,  // no key for this campaign id
  kBadMac,           // forged, corrupted, or under another key
  kBadSource,        // source address or port differ from the MAC-covered ones: sent again from another (spoofed) source
  kBadDestination,   // destination address, port or protocol differ: sent again to another host, port or protocol
  kStale,            // send time outside the acceptance window
  kReplayed,         // a (campaign, source address, sequence) seen before
  kBehindWindow,     // a sequence more than the replay window below its sender's newest (replay_guard.h)
  kTooManySenders,   // a new sender while the replay guard holds its maximum of live senders
  kUnexpected,       // a valid reply that matches no probe of this round
  kLate,             // a valid answer to a probe a retry already settled
  kCount
};
std::string_view reject_name(Reject r);

// Writes the packet (MAC included) into out; returns kProbeSize.
size_t encode_probe(const ProbeHeader& h, const MacKey& key, std::span<uint8_t, kProbeSize> out);

// Structural checks and header decode, without the MAC (the caller picks the
// key by the decoded campaign id). Returns false and sets *why on failure:
// magic and version are read before the length, so a shorter packet of
// another version is counted as bad_version, not truncated.
bool parse_probe(std::span<const uint8_t> packet, ProbeHeader* h, Reject* why);
// The MAC of a parsed packet under `key`.
bool verify_probe_mac(std::span<const uint8_t> packet, const MacKey& key);
// Whether the MAC-covered 5-tuple of h is the one the receiver saw (`seen`);
// sets *why to kBadSource or kBadDestination when not.
bool tuple_matches(const ProbeHeader& h, const FiveTuple& seen, Reject* why);

uint64_t realtime_ns();

}  // namespace weft::probe
