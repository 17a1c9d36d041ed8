// One step on a 3-tier Clos, coloured tier by tier: the route planner's core
// on a fabric of pods (leaf - aggregation - core).
//
// The fabric (topology/builders.h, build_clos3): every pod has S aggregation
// switches; aggregation switch s of every pod links to core plane s. A
// cross-pod route is leaf, agg s of the source pod, a core c of plane s, agg
// s of the destination pod, leaf; a route inside one pod is leaf, agg s,
// leaf. A route is therefore the key (s, c) — the plane ("slot") and the core
// within it (c = -1 inside a pod) — and the links it loads are
//   tier 1: source leaf -> slot s, slot s -> destination leaf;
//   tier 2: (source pod, slot s) -> core c, core c -> (destination pod, slot s).
//
// Decomposition. Tier 1 is the 2-tier problem: a bipartite multigraph
// (source leaf x destination leaf, one edge per flow that leaves its leaf)
// whose colours are the slots. Tier 2, for each slot s, is again one: (source
// pod x destination pod, one edge per cross-pod flow of colour s) whose
// colours are the cores of plane s. Load on a link = edges of one colour at
// one vertex, so a colouring of each graph with at most K edges of a colour
// per vertex is a routing with load <= K on every link.
//
// Why this meets the bound with full lists (every route usable for every
// flow): König's edge-colouring theorem (D. König, Math. Ann. 77, 1916;
// A. Schrijver, Combinatorial Optimization, 2003, Thm 20.1) colours a
// bipartite multigraph of maximum degree D with D colours. Splitting each
// vertex into K copies with <= ceil(deg / K) edges each turns it into "each
// colour at most K times per vertex" (list_edge_coloring.h). Tier 1 has leaf
// degree <= S * K1 with K1 = max ceil(flows leaving or entering a leaf / S),
// the checker's leaf bound (link_load.h), so K1 is reached. After tier 1
// every leaf holds <= K1 edges of slot s, so pod P holds <= L * K1 of them (L
// leaves per pod), and tier 2 needs ceil(L * K1 / C) <= K1 colours per core
// whenever L <= C (C cores per plane: an aggregation switch with no fewer
// uplinks than downlinks). Every link is then at <= K1: the bound. Where
// L > C (aggregation oversubscribed) tier 2 may need more than the leaf
// bound, and the result says so (max_load > target).
//
// Lists. A flow may only take routes its source ports reach over links that
// are up (planner.h, 2), so both tiers are list edge colourings, solved by
// list_edge_coloring.h's alternating-chain search (exact by König when the
// lists are full). A tier-1 colour whose tier-2 list then leaves a flow on an
// overloaded core link is struck from that flow's tier-1 list and both tiers
// are coloured again (at most `repairs` times): a search, not a proof, when
// lists are short; the caller reports max_load beside the checker's bound.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "weft/common/status.h"
#include "weft/routing/list_edge_coloring.h"
#include "weft/topology/fabric.h"

namespace weft::routing {

// A route as its plane and core: core = -1 for a route inside one pod.
struct Clos3Key {
  int slot = 0;
  int core = -1;
};

// The plane structure of a 3-tier Clos and which of its links are up.
class Clos3Shape {
 public:
  // Fails (nullopt) when the fabric is not a 3-tier Clos with planes: a leaf
  // or aggregation switch without a pod, a core linked to aggregation
  // switches of different slots, or links other than leaf-agg and agg-core.
  static std::optional<Clos3Shape> of(const topo::Fabric& f);

  // The key of a route of switches (source leaf first) when it has one of the
  // two shapes above over links that are up; nullopt otherwise.
  std::optional<Clos3Key> key(std::span<const int> route) const;

  int slots() const { return slots_; }
  int plane_size() const { return plane_; }  // the largest plane's cores
  int pods() const { return pods_; }
  int pod(int sw) const { return pod_[static_cast<size_t>(sw)]; }
  int num_switches() const { return static_cast<int>(pod_.size()); }

 private:
  int slots_ = 0, plane_ = 0, pods_ = 0;
  std::vector<int> pod_;    // leaves and aggregation switches; -1 for cores
  std::vector<int> slot_;   // aggregation switch -> slot, core -> plane; -1 for leaves
  std::vector<int> index_;  // core -> index within its plane
  std::vector<char> leaf_up_;  // [leaf * slots + s]: its link to slot s is up
  std::vector<char> agg_up_;   // [agg * plane + c]: its link to core c of its plane is up
};

// One flow that leaves its leaf: its candidate keys are keys[at, at + n).
struct Clos3Flow {
  int src_leaf = 0, dst_leaf = 0;  // switch indices
  uint32_t at = 0, n = 0;
};

struct Clos3Options {
  int min_load = 1;      // never aim below this (the step's access-link bound)
  int budget = 20000;    // list colouring: ejections per edge insertion
  int repairs = 8;       // times a tier-1 colour may be struck and both tiers redone
};

struct Clos3Coloring {
  std::vector<int> chosen;  // per flow: index into its keys (0 .. n-1)
  int max_load = 0;         // over every leaf-agg and agg-core link, both directions
  int target = 0;           // tier 1's bound: max over leaves ceil(degree / usable slots), >= min_load
  int repairs = 0;          // times both tiers were coloured again
};

// Keeps its buffers between calls (the planner colours ~10 steps of 65,536
// flows each). Fails when a flow has no candidate key or names a key out of
// range.
class Clos3Colorer {
 public:
  explicit Clos3Colorer(const Clos3Shape& shape) : shape_(shape) {}
  Result<Clos3Coloring> color(std::span<const Clos3Flow> flows, std::span<const Clos3Key> keys,
                              const Clos3Options& opt = {});

 private:
  const Clos3Shape& shape_;
  std::vector<ListEdge> tier1_, tier2_;
  std::vector<int> tier2_flow_;     // tier2_[i] is flow tier2_flow_[i]
  std::vector<char> struck_;        // per key: its slot was struck for its flow
  std::vector<int> slot_, core_;    // per flow: chosen
};

}  // namespace weft::routing
