// Rounds by König edge colouring, where a step's conflicts form a bipartite
// graph: as many rounds as the step's max load, the fewest possible.
//
// Two flows conflict when they share a directed fabric link (rounds.h). Links
// that carry exactly the same flows are one constraint, so merge them into a
// class. When every flow then touches at most two classes and the classes
// split into two sides with each flow's two classes on opposite sides, the
// flows are the edges of a bipartite multigraph (a flow of one class gets a
// vertex of its own opposite it). A round is a colour, a class's degree is
// the load of each of its links, and König's theorem (D. König, Math. Ann.
// 77, 1916; A. Schrijver, Combinatorial Optimization, 2003, Thm 20.1) colours
// the edges with max degree colours: rounds = max load.
//
// That is the shape of a 2-tier Clos step (a flow's uplink and downlink), and
// of a 3-tier step planned by clos3_coloring.h whose leaves and pods are
// paired one to one (HD on contiguous leaf sets): leaf L sends only to L', so
// its uplink to slot s and L''s downlink from s carry the same flows, and
// likewise the core links of a pod pair; each flow then touches a leaf-tier
// class and a core-tier class. Anything else returns 0 and the caller falls
// back to first-fit (rounds.h).
#pragma once

#include <span>
#include <vector>

#include "weft/routing/rounds.h"

namespace weft::routing {

// Fills round[i] for flows[i] and returns the number of rounds, or returns 0
// (round untouched) when the conflicts are not of the shape above. `order`
// lists the flows in the caller's order of preference: edges are coloured in
// that order, so with one link the first flow gets round 0.
int bipartite_rounds(std::span<const RoundFlow> flows, std::span<const size_t> order, int num_directed_links,
                     std::vector<int>& round);

}  // namespace weft::routing
