// The route planner: a source port for every directed flow of a collective,
// chosen so that in every step the flows spread over distinct links.
//
//   auto table = make_model_path_table(fabric, make_hash("crc32", 1).value());
//   auto sched = build_schedule(Collective::kAllreduceHd, order.size(), count).value();
//   PlannerOptions opt;                       // udp, ports 49152-65535, 64 per pair
//   PlannedRoutes pr = plan_routes(fabric, order, sched, *table, opt).value();
//   save_plan(pr.plan, "plan.json");
//
// How (docs/route-plan.md):
//   1. Steps with the same flows (HD's reduce-scatter and allgather at one
//      distance, ring's two phases) are planned once: a flow's port, hence
//      its path, is fixed for the whole collective. A directed pair that
//      appears in steps with different flow sets is refused (no schedule of
//      ours has one).
//   2. Per flow the path table says which of `ports_per_pair` source ports
//      land on which route; routes over links that are down are dropped.
//      Every planned port is one the table offered: a probe database offers
//      only ports it saw answered, so a port nobody probed is never planned.
//      Flows inside one leaf (every port goes the same way) ask for as many
//      ports as their host has flows. Where one rank pair has several flows
//      (nccl-ring: a flow per channel and QP), the pair's ports are dealt
//      out among them route by route, so they never compete for a port
//      however the colouring spreads them.
//      On a 2-tier Clos a class is first planned from the first `first_ports`
//      ports only, and kept when that plan cannot be bettered (load on
//      fabric links at the step's bound for them, and with rounds no more
//      rounds than that); otherwise it is planned again from all of them.
//   3. 2-tier Clos: the step is a bipartite multigraph (source leaf ->
//      destination leaf) coloured with the spines, each flow restricted to
//      the spines its ports reach (list_edge_coloring.h: exact by König when
//      every spine is reachable, alternating-chain search otherwise).
//      3-tier Clos with planes: slots, then cores, each a colouring of its
//      own (clos3_coloring.h). Other fabrics: min-congestion route
//      assignment (route_assignment.h).
//      E-ECMP (the table hashes the destination QP): each candidate is a
//      (sport, dqpn) pair, the dqpn one of the destination rank's QPNs
//      (PlannerOptions::qpns), and the flow keeps the pair's dqpn.
//   4. Each flow gets the first candidate port on its route that its source
//      host does not use yet: a sport is used by at most one flow per source
//      host, so a TCP transport binds it without SO_REUSEADDR tricks and
//      never collides with a listen port (those lie outside the range, or are
//      refused). A route whose ports are all taken is struck from that flow's
//      list and the step planned again. A pair whose table offers a route
//      as many ports as its host has flows always finds one free (a
//      targeted probe campaign gathers that many: probe/campaign.h); where
//      none is left, the error names the pair, the ports per route, and what
//      to widen (the port range, ports per pair) or re-probe, by how much.
//   5. Rounds (rounds.h, docs/route-plan.md "Rounds"): a class whose flows
//      still share a directed switch-to-switch link (a failed link left a
//      leaf fewer uplinks than flows) is split into rounds: König colouring
//      where its conflicts are bipartite, first-fit otherwise; every step of
//      the class gets the same rounds. The rounds are kept only where they
//      take no longer than sharing (rounds.h, "Rounds cost time"): else the
//      class runs at once, with its load.
//      nccl-ring plans have none: the NCCL plugin cannot hold one QP back
//      for another (nccl_ring_schedule.cc).
//   6. The plan's per-step max_load is counted by the link-load checker over
//      the plan's paths and rounds (per round), beside the checker's lower
//      bound.
//
// Listen ports (dport): udp flows go to 4791 (RoCEv2). For tcp, rank r
// listens on tcp_dport + k, where k counts the ranks before r (in rank
// order) on r's host: one port per host when each host runs one rank, and a
// fixed, documented rule for several (docs/route-plan.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/ranking/rank_order.h"
#include "weft/routing/path_table.h"
#include "weft/routing/plan.h"
#include "weft/routing/qpn_pool.h"
#include "weft/routing/schedule.h"

namespace weft::routing {

struct PlannerOptions {
  std::string protocol = "udp";  // "udp" (RoCEv2, dport 4791) or "tcp"
  PortRange sports;              // where source ports come from (49152-65535)
  int ports_per_pair = 64;       // candidate source ports asked of the path table per pair
  // Ask this many first, and all ports_per_pair only for a class that does
  // not meet its bound from them (planner.h, 2); 0 (or >= ports_per_pair): all at once.
  int first_ports = 16;
  uint16_t tcp_dport = 29500;    // tcp: the first listen port on every host
  int budget = 20000;            // list colouring: ejections per flow insertion
  // Split steps whose flows must share a fabric link into rounds (planner.h,
  // 5). Off: such steps keep load > 1 and the plan has no rounds.
  bool rounds = true;
  // On a machine with more than one CPU, a second thread fetches the next
  // class's candidates from the path table while one class is coloured
  // (classes of 1,024 flows or more), and judges the plan (link_load.h)
  // while it is written (and `weft route` looks the planned ports up in the
  // table again while it makes the file's text). The plan is the same
  // either way; the table is never asked from two threads at once.
  bool second_thread = true;
  // E-ECMP (the table's model hashes the destination QP, ecmp.h crc32-qp):
  // per rank, the QPNs its peers may send to (qpn_pool.h); each flow gets a
  // (sport, dqpn) choice and the plan its "dqpn". Empty: default_qpn_pool()
  // when the table hashes QPNs. A pool for a table that does not hash QPNs,
  // or QPNs with tcp, is refused.
  QpnPool qpns{};
};

// Rejects an unknown protocol, an empty or too small range, ports_per_pair < 1, first_ports < 0,
// and tcp listen ports inside the source port range.
Status validate(const PlannerOptions& opt, const topo::Fabric& f, const ranking::RankOrder& order);

// nccl-ring's premises (nccl_ring_schedule.cc): udp (RoCE v2 QPs), and one
// rank per host, so that a NIC's only net peer on a channel is its ring
// predecessor (NCCL joins the GPUs of one host inside it) and the plugin's
// connection serial of channel c is c. plan_routes checks them too.
Status validate_nccl_ring(const topo::Fabric& f, const ranking::RankOrder& order, const PlannerOptions& opt);

// Refuses the QPN combinations above (PlannerOptions::qpns), a pool not of
// `ranks` ranks, and QPNs that are not data QPs.
Status validate_qpns(const PathTable& table, const PlannerOptions& opt, int ranks);
// validate_qpns' error for a pool given to a table that does not hash QPNs.
Status refuse_qpn_pool(const PathTable& table);

// dport of every rank (the rule above).
Result<std::vector<uint16_t>> listen_ports(const topo::Fabric& f, const ranking::RankOrder& order,
                                           const PlannerOptions& opt);

struct PlanStats {
  int flows = 0;             // directed flows in the plan
  int fabric_flows = 0;      // flows that leave their leaf
  int planned_classes = 0;   // distinct flow sets planned (HD: log2 P, plus fold/unfold)
  int replans = 0;           // classes planned again after a port ran out
  int exact_classes = 0;     // classes solved by the König reduction
  int max_load = 0;          // over all steps, counted by the checker
  int max_lower_bound = 0;
  int steps_at_bound = 0;    // steps at their bound (link_load.h at_bound)
  int steps = 0;
  int steps_in_rounds = 0;   // steps split into more than one round
  int max_rounds = 1;
  int max_single_round_bound = 0;  // the bound the steps would have without rounds
};

struct PlannedRoutes {
  RoutePlan plan;
  PlanStats stats;
};

Result<PlannedRoutes> plan_routes(const topo::Fabric& f, const ranking::RankOrder& order, const Schedule& s,
                                  PathTable& table, const PlannerOptions& opt);

}  // namespace weft::routing
