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
// which is what failed links make binding. On a 2-tier Clos that is the bound
// the route planner is held to.
#pragma once

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
  int max_load = 0;         // max flows on one directed link
  int max_fabric_load = 0;  // the same over switch-to-switch links only
  uint64_t max_bytes = 0;   // max bytes on one directed link
  int hottest = -1;         // a directed link carrying max_load
  int lower_bound = 0;
  std::vector<int> load;          // per directed link (only with keep_per_link)
  std::vector<uint64_t> bytes;    // per directed link (only with keep_per_link)
  std::vector<Path> paths;        // per flow (only with keep_paths)
};

struct LoadReport {
  std::vector<StepLoad> steps;
  int max_load = 0;
  int max_lower_bound = 0;
  int max_multi_hop = 0;
};

struct CheckOptions {
  bool keep_per_link = false;
  bool keep_paths = false;
};

Result<LoadReport> check_link_load(const topo::Fabric& f, const ranking::RankOrder& order, const Schedule& s,
                                   Router& router, const CheckOptions& opt = {});

// The step lower bound alone (see above).
int step_lower_bound(const topo::Fabric& f, const ranking::RankOrder& order, const Step& step);

}  // namespace weft::routing
