// A tap on a netns host's link for the replay tests: it hands over every UDP
// request the host sends to a port, as the attacker on its link would copy it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "weft/common/status.h"

namespace weft::test {

// Moves the calling thread into namespace `ns` and, until `stop`, calls
// on_request with every IPv4 UDP packet (IPv4 header onwards) the namespace
// sends to `dport`. Sets `ready` once it listens. Returns when stopped, or at
// once with the error that kept it from listening.
Status tap_outgoing_udp(const std::string& ns, uint16_t dport, const std::atomic<bool>& stop,
                        std::atomic<bool>& ready, const std::function<void(std::vector<uint8_t>)>& on_request);

// Writes the host-order IPv4 address `ip` at byte `at` of an IPv4 packet
// (12: the source address, 16: the destination).
void put_ipv4(std::vector<uint8_t>& pkt, size_t at, uint32_t ip);

}  // namespace weft::test
