// Min-congestion route assignment: one candidate path per flow, minimising
// the largest number of flows on one directed link.
//
// The planner's solver for fabrics other than a 2-tier Clos (3-tier Clos,
// BiGraph, custom): a flow's candidates are the distinct paths its source
// ports reach. Choosing one path per flow to minimise the maximum link load
// is unsplittable min-congestion routing, NP-hard in general (Kleinberg,
// "Single-source unsplittable flow", FOCS 1996), so this is a local search:
// flows go in most constrained first, each on the path whose most loaded
// link is least loaded after adding it (ties: smaller total load); then
// rip-up-and-reroute passes take the flows on the most loaded links and move
// each to a candidate on which every link stays below the current maximum,
// until a pass moves nothing. The caller reports the result beside a lower
// bound (link_load.h), so a gap is visible, never hidden.
#pragma once

#include <vector>

namespace weft::routing {

struct RouteChoice {
  std::vector<std::vector<int>> candidates;  // per candidate: directed links it loads
};

struct RouteAssignment {
  std::vector<int> chosen;  // per flow: index into its candidates
  int max_load = 0;
};

// `n_links` bounds the directed link ids. Every flow needs a candidate.
RouteAssignment assign_routes(int n_links, const std::vector<RouteChoice>& flows, int max_passes = 16);

}  // namespace weft::routing
