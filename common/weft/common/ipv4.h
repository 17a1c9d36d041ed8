// IPv4 addresses as host-order integers, the form the probe wire, the
// database and the plans carry, and their dotted-quad text (inet_pton(3)).
#pragma once

#include <arpa/inet.h>

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace weft {

// The host-order address `dotted` names, or 0 when it is not an IPv4 address
// (0.0.0.0 names no host, so callers treat 0 as "none").
inline uint32_t ipv4_or_zero(const std::string& dotted) {
  in_addr a{};
  return ::inet_pton(AF_INET, dotted.c_str(), &a) == 1 ? ntohl(a.s_addr) : 0;
}

inline std::string ipv4_str(uint32_t host_order) {
  return fmt::format("{}.{}.{}.{}", host_order >> 24, (host_order >> 16) & 0xff, (host_order >> 8) & 0xff,
                     host_order & 0xff);
}

}  // namespace weft
