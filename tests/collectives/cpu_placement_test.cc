// Where a host's ranks go when they outnumber its CPUs
// (collectives/cpu_placement.h): blocks of consecutive ranks per CPU, and
// a move that leaves the thread's CPU mask as it was.
#include "cpu_placement.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <cstring>
#include <vector>

namespace weft::coll::internal {
namespace {

struct BlockCase {
  int count;
  std::vector<int> allowed;
  std::vector<int> want;  // by index
};

class BlockCpu : public ::testing::TestWithParam<BlockCase> {};

TEST_P(BlockCpu, PutsConsecutiveRanksOnOneCpuInBlocksAsEvenAsTheCountsAllow) {
  const BlockCase& c = GetParam();
  std::vector<int> got;
  for (int i = 0; i < c.count; ++i) got.push_back(block_cpu(i, c.count, c.allowed));
  EXPECT_EQ(got, c.want);
}

INSTANTIATE_TEST_SUITE_P(
    RanksAndCpus, BlockCpu,
    ::testing::Values(BlockCase{4, {0, 1}, {0, 0, 1, 1}},                 // HD's distance-1 pairs share a CPU
                      BlockCase{3, {0, 1}, {0, 0, 1}},
                      BlockCase{5, {2, 5, 7}, {2, 2, 5, 5, 7}},           // sparse masks: the allowed CPUs only
                      BlockCase{8, {0, 1}, {0, 0, 0, 0, 1, 1, 1, 1}},
                      BlockCase{7, {0, 1, 2}, {0, 0, 0, 1, 1, 2, 2}},
                      BlockCase{2, {0, 1}, {0, 1}},                       // one per CPU where they fit
                      BlockCase{1, {3}, {3}}));

TEST(BlockCpu, IsMinusOneForAnIndexOutsideTheRanksOrNoCpus) {
  EXPECT_EQ(block_cpu(4, 4, {0, 1}), -1);
  EXPECT_EQ(block_cpu(-1, 4, {0, 1}), -1);
  EXPECT_EQ(block_cpu(0, 0, {0, 1}), -1);
  EXPECT_EQ(block_cpu(0, 4, {}), -1);
}

cpu_set_t mask() {
  cpu_set_t s;
  CPU_ZERO(&s);
  EXPECT_EQ(::sched_getaffinity(0, sizeof s, &s), 0);
  return s;
}

std::vector<int> cpus_of(const cpu_set_t& s) {
  std::vector<int> v;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &s)) v.push_back(c);
  }
  return v;
}

TEST(MoveToBlockCpu, GoesToTheLastRanksCpuAndLeavesTheMaskAsItWas) {
  const cpu_set_t before = mask();
  const std::vector<int> allowed = cpus_of(before);
  if (allowed.size() < 2) GTEST_SKIP() << "this process may use one CPU: there is nowhere to move";
  const int count = static_cast<int>(allowed.size()) + 1;  // one more rank than CPUs
  EXPECT_EQ(move_to_block_cpu(count - 1, count), allowed.back());
  EXPECT_EQ(move_to_block_cpu(0, count), allowed.front());
  const cpu_set_t after = mask();
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
}

TEST(MoveToBlockCpu, DoesNothingWhereTheRanksFitTheCpus) {
  const cpu_set_t before = mask();
  const int cpus = CPU_COUNT(&before);
  EXPECT_EQ(move_to_block_cpu(0, cpus), -1);
  EXPECT_EQ(move_to_block_cpu(0, 1), -1);
  const cpu_set_t after = mask();
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
}

}  // namespace
}  // namespace weft::coll::internal
