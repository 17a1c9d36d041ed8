// Planned UDP source ports on RoCE v2.
//
// A RoCE v2 packet's UDP source port is the only field of its 5-tuple a
// sender controls (dport is 4791), so it is how a route plan picks a spine.
// Verbs offers no "source port" attribute; the kernel derives the port from
// the GRH flow label given at RTR (include/rdma/ib_verbs.h):
//
//   rdma_flow_label_to_udp_sport(fl) = 0xC000 | ((fl & 0x3FFF) ^ (fl >> 14 & 0x3F))
//   rdma_get_udp_sport(fl, lqpn, rqpn): fl == 0 -> fl = rdma_calc_flow_label(lqpn, rqpn)
//
// (used by rxe since Linux 5.18, and by hns and irdma). For fl < 0x4000 the
// XOR term is 0, so fl = sport - 0xC000 yields exactly sport. 0xC000 itself
// would take fl = 0 that way, which the kernel reads as "no flow label, hash
// the QPNs"; fl = 0x4001 folds to it instead (1 ^ 1 = 0). Ports below 0xC000
// cannot be produced at all and are rejected. mlx5 NICs instead take the
// port directly (mlx5dv_modify_qp_udp_sport(3), in RTS).
#pragma once

#include <cstdint>

#include "weft/common/status.h"

namespace weft::verbs {

inline constexpr std::uint32_t kRoceSportBase = 0xC000;  // IB_ROCE_UDP_ENCAP_VALID_PORT_MIN

// The flow label that makes the kernel put `sport` on the wire, or an error
// saying which ports are expressible.
Result<std::uint32_t> flow_label_for_sport(std::uint32_t sport);

// The kernel's mapping, for tests and for reporting what a label will do.
constexpr std::uint16_t udp_sport_for_flow_label(std::uint32_t fl) {
  std::uint32_t low = fl & 0x3FFF;
  std::uint32_t high = fl & 0xFC000;
  low ^= high >> 14;
  return static_cast<std::uint16_t>(low | kRoceSportBase);
}

}  // namespace weft::verbs
