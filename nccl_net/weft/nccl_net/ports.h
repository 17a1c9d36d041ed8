// Which flow label a QP of the plugin gets, from the route plan.
//
// A QP is planned by (local NIC address, remote NIC address, connection
// serial, QP index): the plan's flow with those src_addr, dst_addr, conn and
// qp (routing/weft/routing/plan.h). The label is (sport - 0xC000), or
// 0x4001 for 49152, which rxe and the other kernel RoCE providers turn back
// into exactly that UDP source port (collectives/verbs/weft/verbs/source_port.h).
//
// Without a plan every QP gets label 0, which is what NCCL's own IB
// transport sets: the kernel then hashes the two QP numbers into the port.
// With a plan, a QP the plan does not list, or a flow that cannot be applied
// (not udp, a port below 49152), also gets label 0; the caller logs that
// once per QP and counts it (weft_nccl_net_counters), so a fallback is never
// silent. So is a planned port the device refuses to set where it is set
// directly (mlx5dv_modify_qp_udp_sport(3), collectives/verbs rc_qp.h): the
// QP goes on with its flow label, logged and counted as unapplicable.
#pragma once

#include <cstdint>
#include <string>

#include "weft/routing/plan.h"

namespace weft::nccl_net {

struct PortChoice {
  enum Kind { kNoPlan, kPlanned, kNotInPlan, kUnapplicable };
  Kind kind = kNoPlan;
  std::uint16_t sport = 0;       // the planned port (kPlanned, kUnapplicable)
  std::uint32_t flow_label = 0;  // 0 unless kPlanned
  std::string flow;              // with a plan: "plan flow A -> B conn c qp q", for the log
  std::string why;               // kNotInPlan, kUnapplicable: one line for the log
};

PortChoice choose_port(const routing::RoutePlan* plan, const std::string& local_addr, const std::string& remote_addr,
                       int conn, int qp);

// "a.b.c.d" of a host-order IPv4 address, and back (0 when not an address).
std::string ipv4_string(std::uint32_t addr);
std::uint32_t ipv4_value(const std::string& dotted);

}  // namespace weft::nccl_net
