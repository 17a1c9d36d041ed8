// plan_gates: the token waits that make a plan's rounds hold in time.
#include <gtest/gtest.h>

#include "weft/routing/gates.h"

namespace weft::routing {
namespace {

PlanFlow flow(int src, int dst, std::vector<std::string> path, std::vector<int> steps, std::vector<int> rounds) {
  PlanFlow f;
  f.src_rank = src;
  f.dst_rank = dst;
  f.path = std::move(path);
  f.steps = std::move(steps);
  f.rounds = std::move(rounds);
  return f;
}

// Two leaves of three hosts (ranks 0-2 on l1, 3-5 on l2); s3-l2 is down, so
// three flows l1 -> l2 share two spines and C rides s1 in round 1.
RoutePlan two_leaves_one_link_down() {
  RoutePlan p;
  p.collective = "allreduce-hd";
  p.ranks = 6;
  p.flows = {
      flow(0, 3, {"l1", "s1", "l2"}, {0}, {0}),        // A
      flow(1, 4, {"l1", "s2", "l2"}, {0, 2}, {0, 0}),  // B: twice on the same links
      flow(2, 5, {"l1", "s1", "l2"}, {0, 3}, {1, 0}),  // C: after A in step 0
      flow(3, 0, {"l2", "s1", "l1"}, {1}, {0}),        // D
      flow(4, 1, {"l2", "s2", "l1"}, {1}, {0}),        // E: alone on its links
      flow(5, 2, {"l2", "s1", "l1"}, {1}, {1}),        // F: after D in step 1
      flow(2, 3, {"l1", "s1", "l2"}, {2}, {0}),        // G: after C's step 0
      flow(0, 1, {"l1"}, {1}, {0}),                    // within l1: no link
  };
  return p;
}

TEST(PlanGates, EachFlowWaitsForTheReceiversOfTheLatestEarlierSlotOnItsLinks) {
  auto gates = plan_gates(two_leaves_one_link_down());
  ASSERT_TRUE(gates) << gates.status().to_string();
  const std::vector<Gate> want = {
      {0, 2, 3, 0},  // C (0,1) after A (0,0): rank 2 waits for rank 3 to have A's data
      {1, 5, 0, 1},  // F (1,1) after D (1,0)
      {2, 1, 4, 0},  // B at step 2 after its own step 0: rank 4 must have received it
      {2, 2, 5, 0},  // G (2,0) after C (0,1)
      {3, 2, 3, 2},  // C (3,0) after G (2,0)
  };
  EXPECT_EQ(*gates, want);
}

TEST(PlanGates, OneGatePerWaiterSourceAndStepKeepingTheEarliest) {
  RoutePlan p;
  p.ranks = 6;
  p.flows = {
      flow(1, 4, {"l1", "s1", "l2"}, {0}, {0}),
      flow(2, 4, {"l1", "s2", "l2"}, {0}, {0}),
      flow(0, 3, {"l1", "s1", "l2"}, {1}, {0}),  // after 1 -> 4 on l1-s1 and s1-l2
      flow(0, 5, {"l1", "s2", "l2"}, {2}, {1}),  // after 2 -> 4 on l1-s2 and s2-l2
  };
  auto gates = plan_gates(p);
  ASSERT_TRUE(gates) << gates.status().to_string();
  EXPECT_EQ(*gates, (std::vector<Gate>{{1, 0, 4, 0}}));
}

TEST(PlanGates, APlanWithoutRoundsHasNoGates) {
  RoutePlan p = two_leaves_one_link_down();
  for (PlanFlow& f : p.flows) f.rounds.assign(f.steps.size(), 0);
  auto gates = plan_gates(p);
  ASSERT_TRUE(gates) << gates.status().to_string();
  EXPECT_TRUE(gates->empty());
  for (PlanFlow& f : p.flows) f.rounds.clear();
  EXPECT_TRUE(plan_gates(p)->empty());
}

TEST(PlanGates, AFlowWithoutStepsIsRejectedWhenRoundsAreUsed) {
  RoutePlan p = two_leaves_one_link_down();
  p.flows[4].steps.clear();
  p.flows[4].rounds.clear();
  auto gates = plan_gates(p);
  ASSERT_FALSE(gates);
  EXPECT_EQ(gates.status().message(),
            "route plan: flow 4 -> 1 lists no steps, but the plan uses rounds "
            "(a flow's steps say when it may use its links)");
}

}  // namespace
}  // namespace weft::routing
