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

#include <cstdint>
#include <span>
#include <vector>

namespace weft::routing {

// One flow's candidates, stored flat (one allocation per flow, not per path).
struct RouteChoice {
  std::vector<int> links;      // every candidate's directed links, concatenated
  std::vector<uint32_t> ends;  // candidate i is links[ends[i-1] (0 for i = 0) .. ends[i])

  size_t size() const { return ends.size(); }
  std::span<const int> candidate(size_t i) const {
    const uint32_t b = i == 0 ? 0 : ends[i - 1];
    return {links.data() + b, ends[i] - b};
  }
  void clear() {
    links.clear();
    ends.clear();
  }
  void close_candidate() { ends.push_back(static_cast<uint32_t>(links.size())); }
};

struct RouteAssignment {
  std::vector<int> chosen;  // per flow: index into its candidates
  int max_load = 0;
};

// `n_links` bounds the directed link ids. Every flow needs a candidate (an
// empty candidate — a route over no shared link — is allowed).
RouteAssignment assign_routes(int n_links, std::span<const RouteChoice> flows, int max_passes = 16);

}  // namespace weft::routing
