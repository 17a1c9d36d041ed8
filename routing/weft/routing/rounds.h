// Rounds: time slices of one step, so that no two of its flows cross one
// directed switch-to-switch link at once (docs/route-plan.md "Rounds").
//
// When a failed link leaves a leaf fewer live uplinks than flows that must
// leave it, no choice of ports gives every flow a link of its own; the
// planner then splits the step into rounds. Where the step's conflicts form a
// bipartite graph (a 2-tier Clos; a 3-tier one with leaves and pods paired
// one to one) König colouring gives max load rounds (bipartite_rounds.h).
// Otherwise the assignment is first-fit
// colouring of the flows' conflict graph (two flows conflict when they share
// a directed fabric link), in a fixed order: flows crossing more fabric links
// first (they conflict most), then by (src, dst) rank, so the same plan comes
// out every time. A flow takes the lowest round in which none of its links is
// taken yet. First-fit needs at most (max load - 1) * (links per flow) + 1
// rounds; the planner reports the rounds it used beside the load a single
// round would have had (PlanStats).
//
// Rounds cost time. A round lasts as long as its busiest link needs for the
// flows it carries in that round, so R rounds take the sum of those, while
// the flows all at once take at least the busiest link's total (max-min
// sharing keeps a bottleneck busy). Rounds with one flow per link and round
// on links of one rate take exactly that bound; rounds that leave two flows
// on a link in one round, more rounds than the load, or a shared link faster
// than the access links that bound the step anyway, take longer: first-fit
// may need more rounds than the load, and the rounds separate fabric links
// only, while on a multi-plane fabric two flows can reach one port
// (planes.h), in one round or not. The planner keeps a class's rounds only where their time,
// counted over every link the flows cross (access links too, each flow's
// bytes over the link's rate), is at most the busiest link's total
// (planner_internal.h, rounds_take_no_longer); else the class runs at once.
#pragma once

#include <span>
#include <vector>

namespace weft::routing {

struct RoundFlow {
  int src = 0;  // ranks: the tie-break order
  int dst = 0;
  std::span<const int> fabric_links;  // directed switch-to-switch links of its path
};

class RoundAssigner {
 public:
  explicit RoundAssigner(int num_directed_links) : used_(static_cast<size_t>(num_directed_links)) {}
  // Fills round[i] for flows[i]; returns the number of rounds (1 when no two
  // flows share a link: every flow in round 0).
  int assign(std::span<const RoundFlow> flows, std::vector<int>& round);

 private:
  std::vector<std::vector<int>> used_;  // per directed link: the rounds that took it
  std::vector<int> touched_;
  std::vector<size_t> order_;
};

}  // namespace weft::routing
