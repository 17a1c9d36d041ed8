// What the route planner (planner.cc) hands its output stage
// (planner_output.cc): the flows with their chosen routes and ports.
// Internal to routing/.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "weft/routing/planner.h"
#include "weft/routing/rounds.h"

namespace weft::routing::planner_internal {

struct FlowInfo {
  int src = 0, dst = 0;          // ranks
  int conn = 0, qp = 0;          // Flow::conn, Flow::qp
  // Where a rank pair has several flows (nccl-ring's QPs): the first flow
  // of the pair (-1: the pair has one), this flow's index in the pair, and
  // (in the first flow) how many it has. Each takes its share of the pair's
  // ports (planner.h, 2).
  int pair_group = -1;
  int pair_k = 0;
  int pair_n = 1;
  int src_nic = 0, dst_nic = 0;
  std::vector<int> steps;
  int ci = -1;                   // its candidates in cands_ while its class is planned
  int route = -1;                // chosen
  uint32_t path_at = 0;          // the chosen route's switches: path_pool_[path_at, + path_len)
  uint32_t path_len = 0;
  int struck = 0;                // routes struck because their ports ran out
  uint16_t sport = 0;
  uint32_t dqpn = 0;             // E-ECMP: the destination QP chosen with sport (0: none)
  int round = 0;                 // in every step of its class (planner.h, 5)
};

// A flow between two ports of one NIC (planes.h): it never enters the fabric.
inline bool in_nic(const FlowInfo& fi) { return fi.src_nic == fi.dst_nic; }

// The chosen routes: each flow's switches live in one pool (a vector per
// flow costs an allocation each, ~10^6 of them at 65,536 endpoints).
struct Chosen {
  std::vector<FlowInfo>& flows;
  const std::vector<int>& path_pool;
  const std::vector<std::vector<int>>& classes;   // flows planned together (planner.h, 1)
  const std::vector<std::vector<int>>& step_ids;  // per step: its flows, in the step's order
  std::span<const int> path(const FlowInfo& fi) const { return {path_pool.data() + fi.path_at, fi.path_len}; }
};

// Rounds of one class (rounds.h) over its flows' chosen paths' directed
// switch-to-switch links: fills round[i] for ids[i], returns how many.
int class_rounds(const topo::Fabric& f, const Chosen& c, const std::vector<int>& ids, RoundAssigner& assigner,
                 std::vector<int>& round);

// Rounds per class (planner.h, 5; rounds.h) over the chosen paths' directed
// switch-to-switch links: sets FlowInfo::round; true when some class runs in
// more than one round.
bool assign_rounds(const topo::Fabric& f, Chosen& c);

// The plan file's content and the stats, judged by the link-load checker
// over the chosen paths (planner.h, 6). Moves each flow's steps into the plan.
Status emit_plan(const topo::Fabric& f, const ranking::RankOrder& order, const Schedule& s,
                 const PlannerOptions& opt, const std::vector<uint16_t>& dports, Chosen& c, bool has_rounds,
                 PlannedRoutes& out);

}  // namespace weft::routing::planner_internal
