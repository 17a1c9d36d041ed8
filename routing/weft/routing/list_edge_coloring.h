// Capacitated list edge colouring of a bipartite multigraph: the route
// planner's core on a 2-tier Clos.
//
// One step of a collective is a bipartite multigraph: an edge per cross-leaf
// flow from its source leaf (left) to its destination leaf (right); the
// colours are the spines. A flow may take only the spines some probed (or
// modelled) source port of its host pair reaches, over links that are up: its
// list. The load of (leaf, spine) is the number of edges of that colour at
// that leaf — the flows on that uplink (left) or downlink (right). We want
// every edge coloured from its list with the largest load as small as
// possible.
//
// - Full lists (every spine usable by every flow): exact. Split each vertex
//   into K copies, deal its edges round-robin over them (copy degree
//   <= ceil(deg/K) <= colours), and König-colour the split graph
//   (edge_coloring.h); each colour then appears at most K times per vertex,
//   K = max(min_load, ceil(max degree / colours)) — the lower bound.
// - Lists: list edge colouring is NP-complete in general, so we search. Edges
//   go in most constrained first; an edge whose listed colours are all full
//   at one end ejects an edge of that colour there, which must then find
//   another of its colours, and so on — the alternating-path recolouring of
//   König's proof (a/b chains) generalised to lists and capacities, as a
//   depth-first search with a per-insertion budget. An edge that no chain
//   places takes its least-loaded colour (the load rises above the target)
//   and a repair pass retries such edges once the rest have settled. The
//   target is the lower bound max over vertices of
//   ceil(degree / |colours listed at the vertex|).
#pragma once

#include <vector>

#include "weft/common/status.h"

namespace weft::routing {

struct ListEdge {
  int left = 0;
  int right = 0;
  std::vector<int> colours;  // allowed colours, distinct, in [0, n_colours)
};

struct ListColoringOptions {
  int min_load = 1;           // never aim below this load (the step's other bounds)
  int budget = 20000;         // ejections tried per edge insertion
};

struct ListColoring {
  std::vector<int> colour;    // per edge
  int max_load = 0;           // achieved: max edges of one colour at one vertex
  int lower_bound = 0;        // the target (see above); max_load == lower_bound is optimal
  bool exact = false;         // solved by the König reduction (full lists)
};

// Fails when an edge's list is empty or names a colour out of range.
Result<ListColoring> color_list_edges(int n_left, int n_right, int n_colours, const std::vector<ListEdge>& edges,
                                      const ListColoringOptions& opt = {});

}  // namespace weft::routing
