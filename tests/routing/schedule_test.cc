#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "weft/routing/schedule.h"

namespace weft::routing {
namespace {

std::vector<std::tuple<int, int, uint64_t>> flows_of(const Step& s) {
  std::vector<std::tuple<int, int, uint64_t>> out;
  for (const auto& f : s.flows) out.emplace_back(f.src, f.dst, f.bytes);
  return out;
}

TEST(HdSchedule, FiveRanksFoldRankZeroThenHalveFromDistanceOne) {
  // P = 5: p' = 4, rem = 1. Rank 0 folds into 1; newranks 0..3 = ranks 1..4.
  // 10 elements of 4 bytes: halves [0,5)/[5,10), then [0,2)/[2,5), [5,7)/[7,10).
  auto s = build_schedule(Collective::kAllreduceHd, 5, 10, 4);
  ASSERT_TRUE(s);
  ASSERT_EQ(s->steps.size(), 6u);
  using V = std::vector<std::tuple<int, int, uint64_t>>;
  EXPECT_EQ(s->steps[0].phase, "fold");
  EXPECT_EQ(flows_of(s->steps[0]), (V{{0, 1, 40}}));
  EXPECT_EQ(s->steps[1].phase, "rs");
  EXPECT_EQ(s->steps[1].distance, 1);
  // newrank v sends the half its partner keeps: v even keeps lower, sends upper (5 elements).
  EXPECT_EQ(flows_of(s->steps[1]), (V{{1, 2, 20}, {2, 1, 20}, {3, 4, 20}, {4, 3, 20}}));
  EXPECT_EQ(s->steps[2].distance, 2);
  EXPECT_EQ(flows_of(s->steps[2]), (V{{1, 3, 12}, {2, 4, 12}, {3, 1, 8}, {4, 2, 8}}));
  EXPECT_EQ(s->steps[3].phase, "ag");
  EXPECT_EQ(s->steps[3].distance, 2);
  EXPECT_EQ(flows_of(s->steps[3]), (V{{1, 3, 8}, {2, 4, 8}, {3, 1, 12}, {4, 2, 12}}));
  EXPECT_EQ(s->steps[4].distance, 1);
  EXPECT_EQ(flows_of(s->steps[4]), (V{{1, 2, 20}, {2, 1, 20}, {3, 4, 20}, {4, 3, 20}}));
  EXPECT_EQ(flows_of(s->steps[5]), (V{{1, 0, 40}}));
}

class HdBlocks : public ::testing::TestWithParam<std::tuple<int, uint64_t>> {};

TEST_P(HdBlocks, PartitionTheVectorAfterReduceScatter) {
  const auto [ranks, count] = GetParam();
  HdLayout L = hd_layout(ranks);
  std::vector<int> owner(count, -1);
  for (int v = 0; v < L.pof2; ++v) {
    Range r = hd_block(L, v, L.log2_pof2(), count);
    for (uint64_t i = r.lo; i < r.hi; ++i) {
      ASSERT_EQ(owner[i], -1) << "element " << i << " owned twice";
      owner[i] = v;
    }
  }
  for (uint64_t i = 0; i < count; ++i) ASSERT_GE(owner[i], 0) << "element " << i << " owned by nobody";
  // Each rank sends in total (count - own block) in RS and the same in AG.
  auto s = build_schedule(Collective::kAllreduceHd, ranks, count, 1);
  ASSERT_TRUE(s);
  std::map<int, uint64_t> rs_sent;
  for (const auto& st : s->steps) {
    if (st.phase == "rs") {
      for (const auto& f : st.flows) rs_sent[f.src] += f.bytes;
    }
  }
  for (int v = 0; v < L.pof2 && L.pof2 > 1; ++v) {
    EXPECT_EQ(rs_sent[L.rank_of(v)], count - hd_block(L, v, L.log2_pof2(), count).size());
  }
}

INSTANTIATE_TEST_SUITE_P(Awkward, HdBlocks,
                         ::testing::Combine(::testing::Values(1, 2, 3, 5, 6, 7, 8, 13, 64),
                                            ::testing::Values(0u, 1u, 7u, 1023u, 262147u)));

TEST(HdLayout, MapsRanksAndNewranksBothWays) {
  HdLayout L = hd_layout(13);
  EXPECT_EQ(L.pof2, 8);
  EXPECT_EQ(L.rem, 5);
  for (int r = 0; r < 13; ++r) {
    int v = L.newrank(r);
    if (r < 10 && r % 2 == 0) {
      EXPECT_EQ(v, -1);
    } else {
      EXPECT_EQ(L.rank_of(v), r);
    }
  }
}

TEST(RingSchedule, SendsAllButOneChunkPerPhase) {
  auto s = build_schedule(Collective::kAllreduceRing, 3, 10, 4);  // chunks 3, 3, 4 elements
  ASSERT_TRUE(s);
  ASSERT_EQ(s->steps.size(), 2u);
  EXPECT_EQ(s->steps[0].repeat, 2);
  using V = std::vector<std::tuple<int, int, uint64_t>>;
  // RS: rank r skips chunk r+1; AG: skips chunk r+2.
  EXPECT_EQ(flows_of(s->steps[0]), (V{{0, 1, 28}, {1, 2, 24}, {2, 0, 28}}));
  EXPECT_EQ(flows_of(s->steps[1]), (V{{0, 1, 24}, {1, 2, 28}, {2, 0, 28}}));
}

TEST(Schedule, RejectsZeroRanksAndUnknownNames) {
  EXPECT_FALSE(build_schedule(Collective::kAllreduceHd, 0, 4));
  EXPECT_FALSE(parse_collective("allreduce-tree"));
  EXPECT_EQ(parse_collective("allreduce-ring"), Collective::kAllreduceRing);
}


// The collective engine finds its steps in a route plan by these indices.
class HdStepIndex : public ::testing::TestWithParam<int> {};
TEST_P(HdStepIndex, NamesThePhaseAndDistanceOfBuildSchedule) {
  const int n = GetParam();
  auto s = build_schedule(Collective::kAllreduceHd, n, 64, 4);
  ASSERT_TRUE(s);
  const HdLayout L = hd_layout(n);
  if (L.rem > 0) {
    EXPECT_EQ(s->steps[static_cast<size_t>(hd_fold_step(L))].phase, "fold");
    EXPECT_EQ(s->steps[static_cast<size_t>(hd_unfold_step(L))].phase, "unfold");
    EXPECT_EQ(hd_unfold_step(L) + 1, static_cast<int>(s->steps.size()));
  }
  for (int k = 0; k < L.log2_pof2(); ++k) {
    const Step& rs = s->steps[static_cast<size_t>(hd_rs_step(L, k))];
    const Step& ag = s->steps[static_cast<size_t>(hd_ag_step(L, k))];
    EXPECT_EQ(rs.phase, "rs");
    EXPECT_EQ(rs.distance, 1 << k);
    EXPECT_EQ(ag.phase, "ag");
    EXPECT_EQ(ag.distance, 1 << k);
  }
}
INSTANTIATE_TEST_SUITE_P(Awkward, HdStepIndex, ::testing::Values(2, 3, 4, 5, 7, 8, 13, 16));

}  // namespace
}  // namespace weft::routing
