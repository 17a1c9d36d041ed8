// Bipartite edge colouring with the minimum number of colours (König).
//
// A step of a collective on a 2-tier Clos is a bipartite multigraph: one edge
// per cross-leaf flow, from its source leaf (left) to its destination leaf
// (right). Colouring the edges with the spines so that no two edges at a
// vertex share a colour puts at most one flow on every leaf->spine and
// spine->leaf link. König's theorem says max-degree colours suffice; the
// classic alternating-path argument constructs them: to colour (u, v) take a
// colour a free at u and b free at v; if a is taken at v, swap a and b along
// the a/b path starting at v (it cannot reach u in a bipartite graph), which
// frees a at v. O(E * V) worst case, near-linear on collective steps.
#pragma once

#include <vector>

#include "weft/common/status.h"

namespace weft::routing {

struct BipartiteEdge {
  int left;
  int right;
};

// Colours in [0, colours). Fails when a vertex has degree > colours.
Result<std::vector<int>> color_bipartite_edges(int n_left, int n_right, const std::vector<BipartiteEdge>& edges,
                                               int colours);

}  // namespace weft::routing
