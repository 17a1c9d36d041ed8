// What the plugin puts in NCCL's opaque handle, and the records the two
// sides of a connection swap over its TCP socket before the QPs go to RTR.
//
// The handle (NCCL carries it from listen() on one rank to connect() on
// another, NCCL_NET_HANDLE_MAXSIZE = 128 bytes): the listener's NIC address
// (the IPv4 address of its RoCE v2 GID, the `dst_addr` of the plan's flows),
// the TCP port it accepts on (at that address), and the connection serial
// (the listener's count of listen() calls on that device, the plan's `conn`).
// Big-endian, fixed offsets; every byte not named below must be zero, so a
// handle that is not ours (or was cut short) is refused, not half-read.
// The last 8 bytes are the connecting side's own: NCCL calls connect() again
// with the same handle until it returns a comm, so the half-made connection
// is kept there (as NCCL's IB transport keeps its stage in the handle); they
// are never sent to the peer and decode_handle does not read them.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "weft/common/status.h"
#include "weft/verbs/rc_qp.h"

namespace weft::nccl_net {

inline constexpr std::size_t kHandleBytes = 128;  // NCCL_NET_HANDLE_MAXSIZE
inline constexpr std::uint32_t kHandleMagic = 0x57464E43;  // "WFNC"
inline constexpr std::uint16_t kWireVersion = 2;  // 2: the hello carries a traffic class
inline constexpr std::size_t kHandleStateOffset = kHandleBytes - 8;
inline constexpr int kMaxQps = 16;  // QPs per connection (WEFT_NCCL_QPS)

struct ListenHandle {
  std::uint32_t nic_ipv4 = 0;  // host order
  std::uint16_t tcp_port = 0;
  std::uint32_t serial = 0;
};

std::array<std::uint8_t, kHandleBytes> encode_handle(const ListenHandle& h);
// Refuses a wrong magic or version, a zero port or address, and any non-zero
// reserved byte, naming what is wrong.
Result<ListenHandle> decode_handle(const std::uint8_t* bytes);

// Connector -> listener: who is calling, on which connection, with how many
// QPs, the traffic class NCCL gave the connect (the listener's QPs take it
// too, as NCCL's IB receiver takes the sender's: its ACKs and credits then
// travel in the same class as the data), and each QP's endpoint record
// (weft/verbs/rc_qp.h).
// Listener -> connector: its QPs' records, one per connector QP (and the
// class it took).
struct Hello {
  std::uint32_t nic_ipv4 = 0;
  std::uint32_t serial = 0;
  std::vector<verbs::EndpointWire> qps;
  int traffic_class = -1;  // 0..255, or -1: none given (NCCL_NET_TRAFFIC_CLASS_UNDEF)
};
inline constexpr std::size_t kHelloHeaderBytes = 20;
std::vector<std::uint8_t> encode_hello(const Hello& h);
// The QP count from a hello's header (to know how much more to read).
Result<int> hello_qp_count(const std::uint8_t* header);
// Decodes header + records (size = kHelloHeaderBytes + 64 * QPs).
Result<Hello> decode_hello(const std::uint8_t* bytes, std::size_t size);

}  // namespace weft::nccl_net
