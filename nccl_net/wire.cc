#include "weft/nccl_net/wire.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace weft::nccl_net {
namespace {

void put(std::uint8_t* p, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * (bytes - 1 - i)));
}
std::uint64_t get(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = v << 8 | p[i];
  return v;
}

// Handle layout (bytes): magic 0..3, version 4..5, port 6..7, address 8..11,
// serial 12..15, zeros 16..127.
enum : int { kHMagic = 0, kHVersion = 4, kHPort = 6, kHAddr = 8, kHSerial = 12, kHEnd = 16 };
// Hello layout: magic 0..3, version 4..5, QP count 6..7, address 8..11,
// serial 12..15, traffic class 16..17 (0x100 | class, or 0: none), zeros
// 18..19, then the QPs' 64-byte records.
inline constexpr std::uint32_t kHelloMagic = 0x57464E48;  // "WFNH"

}  // namespace

std::array<std::uint8_t, kHandleBytes> encode_handle(const ListenHandle& h) {
  std::array<std::uint8_t, kHandleBytes> b{};
  put(b.data() + kHMagic, kHandleMagic, 4);
  put(b.data() + kHVersion, kWireVersion, 2);
  put(b.data() + kHPort, h.tcp_port, 2);
  put(b.data() + kHAddr, h.nic_ipv4, 4);
  put(b.data() + kHSerial, h.serial, 4);
  return b;
}

Result<ListenHandle> decode_handle(const std::uint8_t* b) {
  if (b == nullptr) return invalid_argument("connection handle is NULL");
  if (get(b + kHMagic, 4) != kHandleMagic) {
    return invalid_argument(fmt::format("connection handle has magic {:#010x}, not weft's {:#010x} (another plugin's handle?)",
                                        get(b + kHMagic, 4), kHandleMagic));
  }
  if (get(b + kHVersion, 2) != kWireVersion) {
    return invalid_argument(fmt::format("connection handle version {}, this plugin speaks {}", get(b + kHVersion, 2),
                                        kWireVersion));
  }
  ListenHandle h;
  h.tcp_port = static_cast<std::uint16_t>(get(b + kHPort, 2));
  h.nic_ipv4 = static_cast<std::uint32_t>(get(b + kHAddr, 4));
  h.serial = static_cast<std::uint32_t>(get(b + kHSerial, 4));
  if (h.tcp_port == 0 || h.nic_ipv4 == 0) return invalid_argument("connection handle names no address or port");
  auto stray = std::find_if(b + kHEnd, b + kHandleStateOffset, [](std::uint8_t c) { return c != 0; });
  if (stray != b + kHandleStateOffset) {
    return invalid_argument(fmt::format("connection handle byte {} is {:#04x}, must be 0", stray - b, *stray));
  }
  return h;
}

std::vector<std::uint8_t> encode_hello(const Hello& h) {
  std::vector<std::uint8_t> b(kHelloHeaderBytes + h.qps.size() * sizeof(verbs::EndpointWire));
  put(b.data(), kHelloMagic, 4);
  put(b.data() + 4, kWireVersion, 2);
  put(b.data() + 6, h.qps.size(), 2);
  put(b.data() + 8, h.nic_ipv4, 4);
  put(b.data() + 12, h.serial, 4);
  put(b.data() + 16, h.traffic_class >= 0 && h.traffic_class <= 255 ? 0x100 | h.traffic_class : 0, 2);
  for (std::size_t i = 0; i < h.qps.size(); ++i) {
    std::memcpy(b.data() + kHelloHeaderBytes + i * sizeof(verbs::EndpointWire), h.qps[i].bytes,
                sizeof(verbs::EndpointWire));
  }
  return b;
}

Result<int> hello_qp_count(const std::uint8_t* header) {
  if (get(header, 4) != kHelloMagic || get(header + 4, 2) != kWireVersion) {
    return data_loss(fmt::format("peer's hello has magic {:#010x} version {}, expected {:#010x} version {}",
                                 get(header, 4), get(header + 4, 2), kHelloMagic, kWireVersion));
  }
  int n = static_cast<int>(get(header + 6, 2));
  if (n < 1 || n > kMaxQps) return data_loss(fmt::format("peer's hello announces {} QPs (1..{})", n, kMaxQps));
  return n;
}

Result<Hello> decode_hello(const std::uint8_t* b, std::size_t size) {
  WEFT_ASSIGN_OR_RETURN(int n, hello_qp_count(b));
  std::size_t want = kHelloHeaderBytes + static_cast<std::size_t>(n) * sizeof(verbs::EndpointWire);
  if (size != want) return data_loss(fmt::format("peer's hello is {} bytes, {} QPs need {}", size, n, want));
  Hello h;
  h.nic_ipv4 = static_cast<std::uint32_t>(get(b + 8, 4));
  h.serial = static_cast<std::uint32_t>(get(b + 12, 4));
  const auto tc = get(b + 16, 2);
  if ((tc != 0 && (tc >> 8) != 1) || get(b + 18, 2) != 0) {
    return data_loss(fmt::format("peer's hello has {:#06x} {:#06x} where a traffic class and zeros belong", tc,
                                 get(b + 18, 2)));
  }
  h.traffic_class = tc == 0 ? -1 : static_cast<int>(tc & 0xFF);
  h.qps.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    std::memcpy(h.qps[static_cast<std::size_t>(i)].bytes,
                b + kHelloHeaderBytes + static_cast<std::size_t>(i) * sizeof(verbs::EndpointWire),
                sizeof(verbs::EndpointWire));
  }
  return h;
}

}  // namespace weft::nccl_net
