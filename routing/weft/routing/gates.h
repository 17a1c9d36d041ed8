// Gates: the waits that enforce a route plan's rounds in time
// (docs/route-plan.md "Rounds").
//
// Slots are ordered by (schedule step, round). On every directed
// switch-to-switch link (consecutive names of a flow's path) the flow
// occurrences (flow, step) crossing it are walked in slot order; a flow
// a -> b in slot (j, r) may start only once every flow on each of its links
// in the latest earlier slot has been received. For such a previous flow
// c -> d at step j' with d != a, a waits for a zero-byte token from d, sent
// once d has received its data of step j': the gate {j, a, d, j'}. (d == a:
// a received that flow itself, nothing to wait for.) Flows of one slot are
// not ordered against each other, and a plan whose flows are all in round 0
// has no gates at all: without rounds, nothing changes.
#pragma once

#include <vector>

#include "weft/common/status.h"
#include "weft/routing/plan.h"

namespace weft::routing {

struct Gate {
  int step = 0;        // the waiter's flow is in this schedule step
  int waiter = 0;      // rank that waits before sending in `step`
  int from = 0;        // rank whose token it waits for
  int after_step = 0;  // `from` sends the token once it has received its data of this step
  friend bool operator==(const Gate&, const Gate&) = default;
};

// Every gate of the plan, one per (waiter, from, after_step) — the earliest
// step that needs it — sorted by (step, waiter, from, after_step). Empty when
// no flow has a nonzero round. after_step <= step always, and a gate's
// previous flow is in a strictly earlier slot than the waiter's flow.
// Error (naming the flow) when rounds are used and a flow with a path of
// two or more switches lists no steps: its place in time would be unknown.
Result<std::vector<Gate>> plan_gates(const RoutePlan& plan);

// The gates of an allreduce-ring plan, per repetition: a ring's step (ring-rs
// or ring-ag) is P-1 repetitions of the same flows, each flow in the round
// the plan gives it in that step, so its gates are those of the plan with
// step u = repetition u of ring-rs (0 <= u < P-1), then repetition
// u - (P-1) of ring-ag. Empty when no flow has a nonzero round; else an
// error when a flow is not a ring flow r -> r + 1.
Result<std::vector<Gate>> ring_plan_gates(const RoutePlan& plan);

}  // namespace weft::routing
