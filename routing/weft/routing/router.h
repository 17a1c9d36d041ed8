// Routers: a path for every flow of one schedule step.
//
//   ideal  the best the fabric allows for this step: on a 2-tier Clos or rail
//          fabric with every link up (plane by plane when it has planes),
//          an exact König edge colouring (load 1 whenever
//          spines >= flows per leaf); elsewhere least-loaded next hops, flow
//          by flow — a heuristic, and the checker reports its lower bound
//          beside it.
//   ecmp   what an unplanned fabric does: each connection gets a random
//          ephemeral source port (seeded; on an E-ECMP fabric a random
//          destination QPN too), and every switch picks its next hop by an
//          ECMP hash model.
//   crossbar  an ideal non-blocking switch (access links only).
// The route planner (weft route) adds routers for planned source ports.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "weft/ranking/rank_order.h"
#include "weft/routing/ecmp.h"
#include "weft/routing/paths.h"
#include "weft/routing/schedule.h"

namespace weft::routing {

class Router {
 public:
  virtual ~Router() = default;
  virtual std::string_view name() const = 0;
  // Fills paths[i] for step.flows[i] (paths is resized by the caller).
  virtual Status route_step(const Step& step, int step_index, std::vector<Path>& paths) = 0;
};

// The address a NIC's traffic carries: its "address" from the topology, or a
// stable synthetic one (10.<nic/65536>.<nic/256 % 256>.<nic % 256>).
uint32_t nic_ipv4(const topo::Fabric& f, int nic);

struct EcmpOptions {
  uint32_t seed = 1;            // switch hash seed, and the port generator's
  uint8_t proto = 17;           // 17 = UDP (RoCEv2), 6 = TCP
  uint16_t dport = kRoceV2Port;
  uint16_t port_lo = 32768;     // Linux's default ip_local_port_range
  uint16_t port_hi = 60999;
  // E-ECMP fabric (ecmp.h crc32-qp): switches hash the destination QP too,
  // and each connection's QPN is a random data QPN (as the receiving HCA
  // assigns it, unplanned); otherwise the crc32 model on the 5-tuple.
  bool hash_qpn = false;
};

std::unique_ptr<Router> make_ideal_router(const topo::Fabric& f, const ranking::RankOrder& order);
std::unique_ptr<Router> make_ecmp_router(const topo::Fabric& f, const ranking::RankOrder& order,
                                         const EcmpOptions& opt);
// An ideal non-blocking switch: every flow crosses only its two access links
// (the source NIC's uplink and the destination NIC's downlink), as if all
// NICs hung off one crossbar — the bound no fabric can beat.
std::unique_ptr<Router> make_crossbar_router(const topo::Fabric& f, const ranking::RankOrder& order);

}  // namespace weft::routing
