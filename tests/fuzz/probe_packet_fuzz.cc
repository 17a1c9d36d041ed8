// libFuzzer target: the probe packet parser and its acceptance checks, as a
// reflector (requests) and as a sender (replies and ICMP-quoted requests) run
// them on untrusted bytes. Any crash, leak or UB (ASan/UBSan) is a bug.
//   build-fuzz/probe_packet_fuzz -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <span>

#include "weft/probe/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft::probe;
  static const MacKey key = MacKey::from_string("fuzz key");
  static KeyRing* keys = [] {
    auto* k = new KeyRing();
    k->set(1, key);
    return k;
  }();
  static ProbeStats stats;
  static RequestAcceptor acceptor(*keys, stats);
  const std::span<const uint8_t> pkt(data, size);
  ProbeHeader h;
  Reject why{};
  if (parse_probe(pkt, &h, &why)) {
    (void)verify_probe_mac(pkt, key);
    // Re-encoding a parsed header must give a packet that parses to the same header.
    std::array<uint8_t, kProbeSize> out;
    encode_probe(h, key, out);
    ProbeHeader back;
    if (!parse_probe(out, &back, &why) || back.sequence != h.sequence || back.send_time_ns != h.send_time_ns ||
        back.reply_port != h.reply_port || !(back.tuple == h.tuple) || !verify_probe_mac(out, key) ||
        !tuple_matches(back, h.tuple, &why)) {
      __builtin_trap();
    }
  }
  // The seed corpus's request (corpus/probe/request.bin) was sent 10.0.0.2:49152 -> 10.0.0.1:4791.
  const FiveTuple request{.src_ip = 0x0a000002, .dst_ip = 0x0a000001, .proto = 17, .sport = 49152, .dport = 4791};
  const FiveTuple reply{.src_ip = 0x0a000001, .dst_ip = 0x0a000002, .proto = 17, .sport = 4791, .dport = 49152};
  (void)acceptor.accept(pkt, request, realtime_ns(), &h);
  (void)accept_reply(pkt, reply, 1, key, ProbeType::kReply, stats, &h);
  (void)accept_reply(pkt, request, 1, key, ProbeType::kRequest, stats, &h);
  return 0;
}
