// RoCE v2 packets seen on a net device (libpcap), for the tests that check
// which UDP source port each QP puts on the wire.
#pragma once

#include <pcap/pcap.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "weft/common/status.h"

namespace weft::verbs::testing {

// What a test needs of one packet: Ethernet / IPv4 / UDP (dport 4791) / BTH.
struct RocePacket {
  std::uint16_t sport = 0;
  std::uint32_t dest_qpn = 0;  // BTH destination QP: QPNs are per device, so
  std::string dst_ip;          // a QP is named by (destination address, QPN)
  std::uint8_t opcode = 0;     // BTH opcode: RC RDMA WRITE is 0x06..0x0B, ACK 0x11
  std::uint8_t tos = 0;        // IPv4 TOS: the GRH traffic class (DSCP << 2 | ECN)
};

// Parses a captured frame; false if it is not a RoCE v2 packet.
bool parse_roce(const std::uint8_t* frame, std::size_t n, RocePacket* out);

// Captures RoCE v2 packets on a net device from a thread until stop().
class RoceCapture {
 public:
  RoceCapture() = default;
  RoceCapture(const RoceCapture&) = delete;
  RoceCapture& operator=(const RoceCapture&) = delete;
  ~RoceCapture() { stop(); }

  Status start(const std::string& netdev);
  std::vector<RocePacket> stop();  // joins the thread; returns every packet seen

 private:
  int drain();
  pcap_t* pc_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::vector<RocePacket> seen_;
};

}  // namespace weft::verbs::testing
