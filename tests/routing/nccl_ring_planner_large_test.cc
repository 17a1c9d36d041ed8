// nccl-ring plans at 4,096 endpoints (label perf: seconds in Release, too
// slow under ASan): every shape of nccl_ring_planner_test.cc at the
// checker's bound over all links and over the switch links alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "nccl_ring_cases.h"

namespace weft::routing {
namespace {

// 4,096 endpoints: 32 spines x 128 leaves x 32 hosts, all hosts or a random
// three quarters, in the scheduler's order (so most ring edges leave their
// leaf) or ranked; label perf (tests/routing/CMakeLists.txt).
class NcclRingPlannerLarge : public ::testing::TestWithParam<Shape> {};

TEST_P(NcclRingPlannerLarge, FourThousandEndpointsReachTheCheckersBound) {
  const Shape shape = GetParam();
  std::mt19937 rng(8800u + static_cast<uint32_t>(shape.channels * 16 + shape.qps));
  auto f = topo::build_clos2({.spines = 32, .leaves = 128, .hosts_per_leaf = 32}).value();
  give_addresses(f);
  auto all = ranking::allocation_all(f);
  std::shuffle(all.begin(), all.end(), rng);
  const bool partial = shape.qps == 2;
  if (partial) all.resize(all.size() * 3 / 4);
  const auto order = shape.channels % 2 == 0 ? ranking::RankOrder{all}
                                             : ranking::rank(f, all, ranking::RankAlgo::kClos).value();
  auto j = plan_and_judge(f, order, shape, 7);
  ASSERT_TRUE(j) << j.status().message();
  ASSERT_EQ(j->plan.flows.size(), static_cast<size_t>(order.size() * shape.channels * shape.qps));
  for (const StepLoad& sl : j->rep.steps) {
    std::printf("C=%d Q=%d, %d endpoints: max load %d (bound %d), switch links %d (bound %d)\n", shape.channels,
                shape.qps, order.size(), sl.max_load, sl.lower_bound, sl.max_fabric_load, sl.fabric_lower_bound);
    EXPECT_EQ(sl.max_load, sl.lower_bound);
    EXPECT_EQ(sl.max_fabric_load, sl.fabric_lower_bound);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, NcclRingPlannerLarge, ::testing::ValuesIn(all_shapes()), shape_name);

}  // namespace
}  // namespace weft::routing
