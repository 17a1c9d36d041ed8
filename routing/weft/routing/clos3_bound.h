// A lower bound on a 3-tier step's max load that counts which cores a
// leaf's flows can reach (clos3_coloring.h: flows, keys, Clos3Shape).
//
// The checker's bound (link_load.h) assumes every route is open to every
// flow. With an ECMP hash it is not: the aggregation switch's choice of core
// is a function of the same source port as the leaf's choice of aggregation
// switch, and a CRC is affine, so for some (leaf, aggregation switch) pairs
// every port that reaches the aggregation switch reaches one and the same
// core (the difference of two CRCs of one message under two seeds does not
// depend on the message). No port of the range helps then.
//
// The bound. At max load K a leaf with d flows leaving it and S slots puts at
// least m = d - (S - 1) K of them on every slot s (each other slot takes at
// most K), and at least m - (its flows inside the pod) of those cross pods.
// Those go up to cores of plane s that some flow of the leaf reaches in slot
// s, and a core link of pod P carries at most K. So for every (pod, slot) a
// flow network source -> leaf (capacity its forced count) -> core it reaches
// (unbounded) -> sink (capacity K) must carry every forced flow; where the
// maximum flow is smaller (Hall's condition fails for some set of leaves:
// P. Hall, J. London Math. Soc. 10, 1935; max-flow min-cut, Ford & Fulkerson
// 1956), load K is impossible. The same holds downwards, grouping flows by
// destination leaf. The bound is the smallest K >= `from` that passes every
// test; with full lists it is `from`.
#pragma once

#include <span>
#include <vector>

#include "weft/routing/clos3_coloring.h"

namespace weft::routing {

struct Clos3Bound {
  int load = 0;                // the bound (>= from)
  Clos3BoundWitness witness;   // why load - 1 fails; pod = -1 when load == from
};

// Flows and keys as Clos3Colorer::color takes them (already validated there:
// every key of this shape).
Clos3Bound clos3_reach_bound(const Clos3Shape& shape, std::span<const Clos3Flow> flows, std::span<const Clos3Key> keys,
                             int from);

}  // namespace weft::routing
