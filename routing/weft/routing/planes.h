// Which NIC port a flow arrives at on a multi-plane fabric.
//
// On a multi-plane fabric (docs/topology-format.md "Rails and planes") a NIC
// has a port on every plane (Alibaba HPN: each NIC's two ports on two
// planes), and `weft rank` gives every port a rank of its own. The planes
// share no switch, so a flow can only reach ports of its own plane. The rule
// every router, the checker, the planner and the simulator follow: a flow
// rides the plane of its source port and arrives at the destination NIC's
// port on that plane. The ports of one NIC are bound to the same GPUs
// (`nics[].gpus`; both ports of NIC g to GPU g on a generated fabric): the
// destination NIC's port on plane k is, among the host's ports with the
// destination port's binding, the one on plane k at the position the
// destination port holds among those on its own plane (`eth<g>p<k>` on a
// generated fabric). Where the two planes hold unequally many such ports, a
// port is missing and a position could name another NIC's: there is none.
//
// Two consequences: a flow between two ports of one NIC arrives at its own
// source port — it never enters the fabric (an in-NIC flow: no path, no
// link load, no time); and a flow whose destination NIC has no port on the
// source's plane has no route (a cross-plane flow, counted by the checker).
#pragma once

#include "weft/common/status.h"
#include "weft/ranking/rank_order.h"
#include "weft/routing/schedule.h"
#include "weft/topology/fabric.h"

namespace weft::routing {

// The NIC a flow from NIC `src` to NIC `dst` arrives at: `dst` itself
// without planes or on the same plane; otherwise dst's port on src's plane,
// -1 when there is none. It equals `src` for an in-NIC flow.
int plane_carrier(const topo::Fabric& f, int src, int dst);

// A flow's source NIC and the NIC it arrives at (plane_carrier).
struct FlowNics {
  int src = -1;
  int dst = -1;  // -1: a cross-plane flow, no route
  bool in_nic() const { return src == dst; }
};
inline FlowNics flow_nics(const topo::Fabric& f, const ranking::RankOrder& order, const Flow& fl) {
  const int s = order.nics[static_cast<size_t>(fl.src)];
  return {s, plane_carrier(f, s, order.nics[static_cast<size_t>(fl.dst)])};
}

// flow_nics for a router: fails for a cross-plane flow, naming it.
Result<FlowNics> routed_nics(const topo::Fabric& f, const ranking::RankOrder& order, const Flow& fl);
// OK when the access links of both ends of flow `fl` (NICs src_nic and
// dst_nic, as routed_nics gives them) are up; else one line naming the
// ranks, the NIC and its switch, and the cure. routed_nics checks this.
Status check_flow_access(const topo::Fabric& f, const Flow& fl, int src_nic, int dst_nic);

}  // namespace weft::routing
