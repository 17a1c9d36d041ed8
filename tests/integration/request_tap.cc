#include "request_tap.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "netns_fabric.h"
#include "weft/probe/fd.h"

namespace weft::test {

Status tap_outgoing_udp(const std::string& ns, uint16_t dport, const std::atomic<bool>& stop,
                        std::atomic<bool>& ready, const std::function<void(std::vector<uint8_t>)>& on_request) {
  WEFT_RETURN_IF_ERROR(enter_netns(ns));
  // ETH_P_ALL: only such taps see outgoing frames (packet(7)).
  probe::UniqueFd fd(::socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ALL)));
  if (!fd) return internal_error(std::string("AF_PACKET socket: ") + std::strerror(errno));
  ready = true;
  std::array<uint8_t, 2048> buf;
  while (!stop) {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 20) != 1) continue;
    sockaddr_ll from{};
    socklen_t len = sizeof from;
    const ssize_t n = ::recvfrom(fd.get(), buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &len);
    if (n < 28 || from.sll_pkttype != PACKET_OUTGOING || from.sll_protocol != htons(ETH_P_IP) ||
        buf[9] != IPPROTO_UDP) {
      continue;
    }
    const size_t ihl = (buf[0] & 0x0fu) * 4;
    if (static_cast<size_t>(n) < ihl + 8 || (buf[ihl + 2] << 8 | buf[ihl + 3]) != dport) continue;
    on_request(std::vector<uint8_t>(buf.begin(), buf.begin() + n));
  }
  return ok_status();
}

void put_ipv4(std::vector<uint8_t>& pkt, size_t at, uint32_t ip) {
  for (int i = 0; i < 4; ++i) pkt[at + static_cast<size_t>(i)] = static_cast<uint8_t>(ip >> (24 - 8 * i));
}

}  // namespace weft::test
