// The link-load checker: the judge of every ranking and routing claim.
//
// For a fabric, a rank order, a schedule and a router it counts, per step,
// the flows and bytes on every directed link and reports the maximum load
// (flows on one directed link at once) beside a lower bound that no routing
// can beat: the access links' own load, and for every switch with uplinks
// ceil(flows that must leave it upward / uplinks that are up), and the same
// for flows entering it from above; and for two switches sharing upper
// neighbours (the leaves of a 2-tier Clos, or of one pod), ceil(flows
// between them / upper switches both still reach over links that are up),
// which is what failed links make binding; and for each pod of a 3-tier
// Clos, ceil(flows leaving it, or entering it, / its aggregation switches'
// links to the cores that are up). On a 2-tier Clos that is the bound the
// route planner is held to.
//
// Rounds (docs/route-plan.md "Rounds"): a step whose flows carry rounds
// (Flow::round) runs them one after another, so load is counted per
// (step, round) — flows of different rounds never share a link at once —
// and the bound is the max over rounds of the bound of that round's flows.
// single_round_bound is the bound of all the step's flows together: what the
// step needs without rounds. Steps without rounds count exactly as before.
//
// Rails and planes (fabric.h): on a multi-plane fabric a flow rides the
// plane of its source port to the destination NIC's port on that plane
// (planes.h). A flow between two ports of one NIC never enters the fabric
// (in_nic_flows: no link load). A flow whose destination host has no NIC at
// that position on the source's plane has no path at all — planes share no
// switch — so it is counted in cross_plane_flows, named in the report, and
// not routed; a correct plan has none. On a rail fabric cross_rail_flows counts flows
// between NICs of different rails (they must climb to a spine), and
// rail_max_load / plane_max_load give the max load over the links of each
// rail (its NICs' access links and its leaves' uplinks) and of each plane.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "weft/ranking/rank_order.h"
#include "weft/routing/router.h"
#include "weft/routing/schedule.h"

namespace weft::routing {

struct StepLoad {
  int step = 0;
  std::string phase;
  int distance = 0;
  int repeat = 1;
  int flows = 0;
  int fabric_flows = 0;     // flows that cross at least one switch-to-switch link
  int multi_hop_flows = 0;  // flows that cross two or more (BiGraph: same-part)
  int rounds = 1;           // max Flow::round + 1
  int max_load = 0;         // max flows of one round on one directed link
  int max_fabric_load = 0;  // the same over switch-to-switch links only
  uint64_t max_bytes = 0;   // max bytes on one directed link, over the whole step
  int hottest = -1;         // a directed link carrying max_load
  int lower_bound = 0;      // max over rounds of the bound of that round's flows
  // The part of lower_bound from switch-to-switch links (0 when no flow
  // leaves its switch): what max_fabric_load can reach. It is below
  // lower_bound where a NIC's own flows are the bottleneck (nccl-ring: C x Q
  // QPs on every access link).
  int fabric_lower_bound = 0;
  int single_round_bound = 0;  // the bound of all the step's flows at once
  int cross_rail_flows = 0;    // NICs on different rails (rail fabrics)
  int cross_plane_flows = 0;   // no port of the destination's NIC on the source's plane: not routed
  int in_nic_flows = 0;        // between two ports of one NIC: not routed, no load (planes.h)
  std::vector<int> rail_max_load;   // per rail (empty without rails)
  std::vector<int> plane_max_load;  // per plane (empty without planes)
  std::vector<int> load;          // per directed link, max over rounds (only with keep_per_link)
  std::vector<uint64_t> bytes;    // per directed link, whole step (only with keep_per_link)
  std::vector<Path> paths;        // per flow (only with keep_paths; empty for cross-plane flows)
};

// A step at its bound: its load (per round) is the bound, and its R rounds
// take no longer than one round would need (R x load within the one-round
// bound). Rounds that a failed link forces are at the bound; rounds where
// the ports found left flows sharing links on a whole fabric are not.
inline bool at_bound(const StepLoad& s) {
  return s.max_load == s.lower_bound && s.rounds * s.max_load <= std::max(s.lower_bound, s.single_round_bound);
}

struct LoadReport {
  std::vector<StepLoad> steps;
  int max_load = 0;
  int max_lower_bound = 0;
  int max_multi_hop = 0;
  int max_rounds = 1;
  int cross_plane_flows = 0;       // over all steps
  std::string first_cross_plane;   // the first such flow, named for a message ("" = none)
};

struct CheckOptions {
  bool keep_per_link = false;
  bool keep_paths = false;
};

Result<LoadReport> check_link_load(const topo::Fabric& f, const ranking::RankOrder& order, const Schedule& s,
                                   Router& router, const CheckOptions& opt = {});

// The lower bound of a step's flows taken all at once (rounds ignored), and
// its part from switch-to-switch links alone.
int step_lower_bound(const topo::Fabric& f, const ranking::RankOrder& order, const Step& step);
int step_fabric_lower_bound(const topo::Fabric& f, const ranking::RankOrder& order, const Step& step);

}  // namespace weft::routing
