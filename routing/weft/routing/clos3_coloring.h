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
// are up (planner.h, 2), so tier 1 is a list edge colouring
// (list_edge_coloring.h: exact by König when the lists are full, an
// alternating-chain search otherwise). Tier 2:
//   - pods paired one to one (every cross-pod flow of P goes to one P', and
//     P' hears from P alone; HD on contiguous leaf sets): each (pod, slot) is
//     a b-matching of flows to cores, solved by augmenting paths (Kuhn 1955;
//     Schrijver Ch. 21), which place every flow whenever the flows' lists
//     allow it at all. Where they do not — a CRC is affine, so an
//     aggregation switch's choice can be tied to the leaf's and many flows of
//     a pod reach one core of a plane only (measured: 9-11 of 128 where 8
//     fit) — a flow swaps slots with one of its leaf pair (tier 1's loads
//     stay), and if that fails too, every flow on the overloaded core link
//     strikes that slot from its tier-1 list and both tiers are coloured
//     again, at most `repairs` times (and not after 6 attempts in a row that
//     left no fewer flows above it), keeping the attempt that left the
//     fewest flows above the target; if that is still above it, each flow on
//     an overloaded link moves to its least busy route (min-congestion, one
//     flow at a time). A search, not a proof.
//   - otherwise: list edge colouring of (source pod x destination pod) per
//     slot, with the same repairs and settling.
// The target. Before tier 2, the colourer computes the bound over the routes
// the ports offer (clos3_bound.h: where a leaf's flows reach too few cores of
// a plane, tier 1's bound cannot be met by any choice of ports) and aims at
// it; where it is above tier 1's bound, tier 1 is coloured with that slack
// and a leaf whose flows in a slot reach only overloaded cores strikes that
// slot for all of them (when its other slots can hold its flows) — which is
// what settles the hash seeds where two leaves of a pod are pinned to one
// core (bench/results/2026-11-26-clos3-reach-bound.md).
// The caller reports max_load beside the checker's bound (link_load.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
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
  int pod(int sw) const { return at(sw).pod; }
  int num_switches() const { return static_cast<int>(sw_.size()); }

 private:
  // One record per switch, so that key() — asked of every route a pair's
  // ports take, ~10^7 times when planning 65,536 endpoints — reads one
  // cache line per switch of the route.
  enum class Role : int8_t { kOther, kLeaf, kAgg, kCore };
  struct Switch {
    Role role = Role::kOther;
    int32_t pod = -1;    // leaves and aggregation switches; -1 for cores
    int32_t slot = -1;   // aggregation switch -> slot, core -> plane; -1 for leaves
    int32_t index = -1;  // core -> index within its plane
  };
  const Switch& at(int sw) const { return sw_[static_cast<size_t>(sw)]; }

  int slots_ = 0, plane_ = 0, pods_ = 0;
  std::vector<Switch> sw_;
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
  int repairs = 16;      // times tier 2's overloaded flows may strike their slot and both tiers be redone
};

// Why a load is out of reach (clos3_bound.h): the leaves of one (pod, slot)
// whose forced flows exceed what the cores they reach may carry at it.
struct Clos3BoundWitness {
  bool up = true;            // source side (core uplinks of the pod) or destination side
  int pod = -1, slot = -1;
  std::vector<int> leaves;   // switch indices
  std::vector<int> cores;    // indices within the plane: every core those leaves' flows reach in the slot
  int forced = 0;            // flows those leaves must put on the slot at K
};

struct Clos3Coloring {
  std::vector<int> chosen;  // per flow: index into its keys (0 .. n-1)
  int max_load = 0;         // over every leaf-agg and agg-core link, both directions
  int tier1_bound = 0;      // max over leaves ceil(degree / usable slots), >= min_load
  int target = 0;           // the lower bound aimed at: tier1_bound raised by clos3_bound.h where the
                            // cores the leaves' flows reach cannot carry it
  Clos3BoundWitness witness;  // why target > tier1_bound (pod -1 when equal)
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
  size_t cell(int pod, int s, int c) const;
  void move(int f, int to, bool log);
  void rollback(size_t mark);
  bool augment(int f);
  bool has_slot(int f, int s) const;
  std::span<const int> cores_of(int f, int s) const;  // f's cores in slot s (cross-pod flows)
  void index_cores();
  bool swap_in(int f);
  std::span<const int> pair_of(int f) const;  // f's leaf pair, f included
  bool tier2_paired();
  void repair_unplaced();
  Status tier2_lists(int budget);
  void strike_pinned();
  void settle(int min_load);

  const Clos3Shape& shape_;
  std::span<const Clos3Flow> flows_;
  std::span<const Clos3Key> keys_;
  int target_ = 1;
  std::vector<int> slot_, core_;    // per flow: chosen (core -1 inside a pod)
  std::vector<ListEdge> tier1_, tier2_;
  std::vector<int> tier2_flow_;     // tier2_[i] is flow tier2_flow_[i]
  // Paired tier 2: flows per (pod, slot, core) cell, each flow's cell, the
  // search stamps, and an undo log of moves for a swap that fails.
  std::vector<std::vector<int>> held_;
  std::vector<int> cell_of_;
  std::vector<unsigned> seen_;
  unsigned search_ = 0;
  std::vector<std::pair<int, int>> undo_;
  std::vector<int> partner_, cross_, order_, unplaced_;
  std::vector<int> over_;           // flows on core links above the target
  std::vector<int> up_, down_;      // core link loads per cell
  std::vector<int> leaf_up_, leaf_down_;  // leaf link loads per (leaf, slot)
  std::vector<int> best_slot_, best_core_;
  std::vector<uint64_t> struck_;    // per flow: slots struck from its tier-1 list
  std::vector<uint32_t> slot_at_, fill_;  // cores_of: per flow, S + 1 offsets into by_slot_
  std::vector<int> by_slot_;
  std::vector<int> deg_out_, deg_in_;  // strike_pinned: flows per leaf
  std::vector<char> hot_;           // strike_pinned: per (leaf, slot), 1: an uplink above the target, 2: a downlink
  std::vector<int> bucket_, ncores_, held_copy_;
  std::vector<std::pair<int, int>> pair_range_;  // per cross-pod flow: its leaf pair in cross_
};

}  // namespace weft::routing
