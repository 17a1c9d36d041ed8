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
//          destination QPN too), and every switch picks its next hop by the
//          fabric's ECMP hash model (EcmpOptions::hash, ecmp.h).
//   crossbar  an ideal non-blocking switch (access links only).
// The route planner (weft route) adds routers for planned source ports.
#pragma once

#include <memory>
#include <string>
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
  // The switches' hash model, a make_hash() name (ecmp.h). A model that
  // hashes the destination QP (crc32-qp, E-ECMP) gives each connection a
  // random data QPN too, as the receiving HCA assigns it, unplanned.
  std::string hash = "crc32";
  uint32_t seed = 1;            // switch hash seed, and the port generator's
  uint8_t proto = 17;           // 17 = UDP (RoCEv2), 6 = TCP
  uint16_t dport = kRoceV2Port;
  uint16_t port_lo = 32768;     // Linux's default ip_local_port_range
  uint16_t port_hi = 60999;
};

// The 5-tuple ECMP gives the connection of flow `fl` between NICs src_nic and
// dst_nic: a random port in [port_lo, port_hi] and, with draw_qpn, a random
// data QPN, both drawn once per directed rank pair from opt.seed.
FiveTuple ecmp_tuple(const topo::Fabric& f, const EcmpOptions& opt, bool draw_qpn, const Flow& fl, int src_nic,
                     int dst_nic);

std::unique_ptr<Router> make_ideal_router(const topo::Fabric& f, const ranking::RankOrder& order);
// An unknown opt.hash is an error naming it and the models.
Result<std::unique_ptr<Router>> make_ecmp_router(const topo::Fabric& f, const ranking::RankOrder& order,
                                                 const EcmpOptions& opt);
// An ideal non-blocking switch: every flow crosses only its two access links
// (the source NIC's uplink and the destination NIC's downlink), as if all
// NICs hung off one crossbar — the bound no fabric can beat.
std::unique_ptr<Router> make_crossbar_router(const topo::Fabric& f, const ranking::RankOrder& order);

}  // namespace weft::routing
