// Encode and parse of the probe packet (wire.h). Big-endian by hand: the
// struct's fields are byte arrays, so there is nothing to byte-swap in place.
#include "weft/probe/wire.h"

#include <time.h>

#include <algorithm>
#include <cstring>

namespace weft::probe {
namespace {

template <size_t N>
void put(uint8_t (&dst)[N], uint64_t v) {
  for (size_t i = 0; i < N; ++i) dst[i] = static_cast<uint8_t>(v >> (8 * (N - 1 - i)));
}
template <size_t N>
uint64_t get(const uint8_t (&src)[N]) {
  uint64_t v = 0;
  for (size_t i = 0; i < N; ++i) v = (v << 8) | src[i];
  return v;
}

}  // namespace

std::string_view reject_name(Reject r) {
  switch (r) {
    case Reject::kTruncated: return "truncated";
    case Reject::kBadMagic: return "bad_magic";
    case Reject::kBadVersion: return "bad_version";
    case Reject::kBadType: return "bad_type";
    case Reject::kUnknownCampaign: return "unknown_campaign";
    case Reject::kBadMac: return "bad_mac";
    case Reject::kBadSource: return "bad_source";
    case Reject::kBadDestination: return "bad_destination";
    case Reject::kStale: return "stale";
    case Reject::kReplayed: return "replayed";
    case Reject::kBehindWindow: return "behind_window";
    case Reject::kTooManySenders: return "too_many_senders";
    case Reject::kUnexpected: return "unexpected";
    case Reject::kLate: return "late";
    case Reject::kCount: break;
  }
  return "?";
}

size_t encode_probe(const ProbeHeader& h, const MacKey& key, std::span<uint8_t, kProbeSize> out) {
  WireProbe w{};
  put(w.magic, kProbeMagic);
  w.version = h.version;
  w.type = static_cast<uint8_t>(h.type);
  w.flags = h.flags;
  w.dscp_seen = h.dscp_seen;
  put(w.campaign, h.campaign);
  put(w.sequence, h.sequence);
  put(w.sport, h.sport);
  put(w.dport, h.dport);
  w.spine = h.spine;
  w.protocol = h.tuple.proto;
  put(w.reply_port, h.reply_port);
  put(w.send_time_ns, h.send_time_ns);
  put(w.src_ip, h.tuple.src_ip);
  put(w.dst_ip, h.tuple.dst_ip);
  put(w.src_port, h.tuple.sport);
  put(w.dst_port, h.tuple.dport);
  std::memcpy(out.data(), &w, kProbeSize);
  const Digest d = key.mac(std::span<const uint8_t>(out.data(), kMacOffset));
  std::memcpy(out.data() + kMacOffset, d.data(), sizeof(w.mac));
  return kProbeSize;
}

bool parse_probe(std::span<const uint8_t> packet, ProbeHeader* h, Reject* why) {
  if (packet.size() < kProbePrefix) {
    *why = Reject::kTruncated;
    return false;
  }
  WireProbe w{};
  std::memcpy(&w, packet.data(), std::min(packet.size(), kProbeSize));
  if (get(w.magic) != kProbeMagic) {
    *why = Reject::kBadMagic;
    return false;
  }
  if (w.version != kProbeVersion) {
    *why = Reject::kBadVersion;
    return false;
  }
  if (packet.size() < kProbeSize) {
    *why = Reject::kTruncated;
    return false;
  }
  if (w.type != static_cast<uint8_t>(ProbeType::kRequest) && w.type != static_cast<uint8_t>(ProbeType::kReply)) {
    *why = Reject::kBadType;
    return false;
  }
  h->version = w.version;
  h->type = static_cast<ProbeType>(w.type);
  h->flags = w.flags;
  h->dscp_seen = w.dscp_seen;
  h->campaign = static_cast<uint32_t>(get(w.campaign));
  h->sequence = static_cast<uint32_t>(get(w.sequence));
  h->sport = static_cast<uint16_t>(get(w.sport));
  h->dport = static_cast<uint16_t>(get(w.dport));
  h->spine = w.spine;
  h->reply_port = static_cast<uint16_t>(get(w.reply_port));
  h->send_time_ns = get(w.send_time_ns);
  h->tuple.src_ip = static_cast<uint32_t>(get(w.src_ip));
  h->tuple.dst_ip = static_cast<uint32_t>(get(w.dst_ip));
  h->tuple.sport = static_cast<uint16_t>(get(w.src_port));
  h->tuple.dport = static_cast<uint16_t>(get(w.dst_port));
  h->tuple.proto = w.protocol;
  return true;
}

bool tuple_matches(const ProbeHeader& h, const FiveTuple& seen, Reject* why) {
  if (h.tuple.src_ip != seen.src_ip || h.tuple.sport != seen.sport) {
    *why = Reject::kBadSource;
    return false;
  }
  if (h.tuple.dst_ip != seen.dst_ip || h.tuple.dport != seen.dport || h.tuple.proto != seen.proto) {
    *why = Reject::kBadDestination;
    return false;
  }
  return true;
}

bool verify_probe_mac(std::span<const uint8_t> packet, const MacKey& key) {
  if (packet.size() < kProbeSize) return false;
  return key.verify(packet.first(kMacOffset), packet.subspan(kMacOffset, 16));
}

uint64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace weft::probe
