#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <tuple>

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

struct NcclCase {
  int ranks, channels, qps;
  uint64_t count;
};

class NcclRingSchedule : public ::testing::TestWithParam<NcclCase> {};

// Every QP of every channel's edge r -> r+1 is one flow; the bytes are the
// ring's over each channel's slice, split evenly over the QPs, so summed
// over channels and QPs an edge carries exactly allreduce-ring's bytes.
TEST_P(NcclRingSchedule, HasAFlowPerChannelAndQpAndTheRingsBytes) {
  const int P = GetParam().ranks, C = GetParam().channels, Q = GetParam().qps;
  const uint64_t count = GetParam().count;
  auto s = build_schedule(Collective::kNcclRing, P, count, 4, {C, Q});
  ASSERT_TRUE(s) << s.status().message();
  auto ring = build_schedule(Collective::kAllreduceRing, P, count, 4).value();
  ASSERT_EQ(s->steps.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const Step& st = s->steps[k];
    EXPECT_EQ(st.phase, k == 0 ? "nccl-rs" : "nccl-ag");
    EXPECT_EQ(st.repeat, P - 1);
    ASSERT_EQ(st.flows.size(), static_cast<size_t>(P * C * Q));
    std::map<std::tuple<int, int, int, int>, uint64_t> seen;
    std::map<int, uint64_t> per_src;
    for (const Flow& f : st.flows) {
      EXPECT_EQ(f.dst, (f.src + 1) % P);
      EXPECT_TRUE(f.conn >= 0 && f.conn < C && f.qp >= 0 && f.qp < Q);
      EXPECT_TRUE(seen.emplace(std::tuple{f.src, f.dst, f.conn, f.qp}, f.bytes).second);
      per_src[f.src] += f.bytes;
    }
    // Per source rank, summed over channels and QPs: each channel's ring
    // bytes over its slice.
    for (const Flow& f : ring.steps[k].flows) {
      const uint64_t slices = [&] {
        uint64_t b = 0;
        for (int c = 0; c < C; ++c) {
          const uint64_t slice = ring_chunk(C, c, count).size();
          b += (slice - ring_chunk(P, (f.src + 1 + static_cast<int>(k)) % P, slice).size()) * 4;
        }
        return b;
      }();
      EXPECT_EQ(per_src[f.src], slices) << "rank " << f.src;
      if (C == 1) {
        EXPECT_EQ(per_src[f.src], f.bytes) << "one channel: allreduce-ring's bytes";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Awkward, NcclRingSchedule,
                         ::testing::Values(NcclCase{2, 1, 1, 10}, NcclCase{3, 2, 4, 13}, NcclCase{5, 8, 3, 1001},
                                           NcclCase{7, 3, 2, 6}, NcclCase{16, 4, 4, 1 << 20}));

TEST(NcclRingSchedule, FiveElementsOverThreeRanksTwoChannelsTwoQps) {
  // Channel 0: elements [0,2), channel 1: [2,5). Rank 0 in reduce-scatter
  // skips chunk 1 of each slice: channel 0 sends 2 - 1 = 1 element, 4 bytes,
  // which the plugin splits over its QPs as 2 + 2; channel 1 sends 3 - 1 = 2
  // elements, 4 + 4 bytes.
  auto s = build_schedule(Collective::kNcclRing, 3, 5, 4, {2, 2}).value();
  std::vector<std::tuple<int, int, int, int, uint64_t>> r0;
  for (const Flow& f : s.steps[0].flows) {
    if (f.src == 0) r0.emplace_back(f.src, f.dst, f.conn, f.qp, f.bytes);
  }
  EXPECT_EQ(r0, (std::vector<std::tuple<int, int, int, int, uint64_t>>{
                    {0, 1, 0, 0, 2}, {0, 1, 0, 1, 2}, {0, 1, 1, 0, 4}, {0, 1, 1, 1, 4}}));
}

TEST(NcclRingSchedule, RejectsShapesOutOfRangeAndShapesForOtherCollectives) {
  auto expect = [](Result<Schedule> r, const std::string& msg) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.status().message(), msg);
  };
  expect(build_schedule(Collective::kNcclRing, 4, 8, 4, {0, 1}), "0 channels: NCCL runs 1..64 (MAXCHANNELS)");
  expect(build_schedule(Collective::kNcclRing, 4, 8, 4, {65, 1}), "65 channels: NCCL runs 1..64 (MAXCHANNELS)");
  expect(build_schedule(Collective::kNcclRing, 4, 8, 4, {1, 0}),
         "0 QPs per connection: the weft NCCL plugin opens 1..16 (WEFT_NCCL_QPS)");
  expect(build_schedule(Collective::kNcclRing, 4, 8, 4, {1, 17}),
         "17 QPs per connection: the weft NCCL plugin opens 1..16 (WEFT_NCCL_QPS)");
  expect(build_schedule(Collective::kAllreduceHd, 4, 8, 4, {2, 1}),
         "allreduce-hd has one flow per pair of ranks: channels and QPs (2 x 1) are for nccl-ring");
  EXPECT_EQ(parse_collective("nccl-ring"), Collective::kNcclRing);
  EXPECT_EQ(build_schedule(Collective::kNcclRing, 1, 8, 4, {2, 2}).value().steps.size(), 0u) << "one rank: no ring";
}

}  // namespace
}  // namespace weft::routing
