#include <mutex>
#include <set>

#include "harness.h"
#include "remap.h"

namespace weft::coll::testing {
namespace {

bool uses(const std::vector<int>& map, Algorithm a, int n, std::pair<int, int> link) {
  for (auto [x, y] : internal::talking_pairs(a, n)) {
    int p = map[static_cast<size_t>(x)], q = map[static_cast<size_t>(y)];
    if ((p == link.first && q == link.second) || (p == link.second && q == link.first)) return true;
  }
  return false;
}

TEST(Remap, SeedCaseEightRankButterflyWithCutLinkZeroOneShiftsByOne) {
  // An 8-rank mesh with link 0-1 cut (remap.h): physical = (logical + 1)
  // mod 8 puts the cut link between logical 7 and 0, which never talk in a
  // butterfly.
  auto map = internal::remap_avoiding(Algorithm::kButterfly, 8, {{0, 1}});
  ASSERT_TRUE(map) << map.status().to_string();
  EXPECT_EQ(*map, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 0}));
}

class RemapAvoids : public ::testing::TestWithParam<std::tuple<Algorithm, int>> {};

TEST_P(RemapAvoids, NoTalkingPairLandsOnAFailedLink) {
  const auto [algo, n] = GetParam();
  const std::vector<std::pair<int, int>> failed = {{0, 1}, {2, n - 1}};
  auto map = internal::remap_avoiding(algo, n, failed);
  ASSERT_TRUE(map) << map.status().to_string();
  std::set<int> seen(map->begin(), map->end());
  EXPECT_EQ(seen.size(), static_cast<size_t>(n)) << "not a permutation";
  for (auto link : failed) EXPECT_FALSE(uses(*map, algo, n, link)) << link.first << "-" << link.second;
}

INSTANTIATE_TEST_SUITE_P(Collectives, RemapAvoids,
                         ::testing::Combine(::testing::Values(Algorithm::kButterfly, Algorithm::kRing,
                                                              Algorithm::kHalvingDoubling),
                                            ::testing::Values(5, 7, 8, 13)));

TEST(Remap, ImpossibleOrderIsAnErrorNamingTheLinks) {
  auto map = internal::remap_avoiding(Algorithm::kRing, 2, {{0, 1}});
  ASSERT_FALSE(map);
  EXPECT_NE(map.status().message().find("failed link"), std::string::npos) << map.status().message();
}

TEST(Remap, OneShotTalksToEveryPeerSoAnyFailedLinkIsAnError) {
  EXPECT_EQ(internal::talking_pairs(Algorithm::kOneShot, 5).size(), 10u);
  EXPECT_TRUE(internal::remap_avoiding(Algorithm::kOneShot, 5, {}));
  auto map = internal::remap_avoiding(Algorithm::kOneShot, 5, {{3, 4}});
  ASSERT_FALSE(map);
  EXPECT_NE(map.status().message().find("oneshot allreduce off the 1 failed link"), std::string::npos)
      << map.status().message();
}

TEST(Remap, AllreduceWithACutLinkNeverSendsOverItAndIsCorrect) {
  for (Algorithm algo : {Algorithm::kButterfly, Algorithm::kHalvingDoubling, Algorithm::kRing}) {
    std::mutex mu;
    std::set<std::pair<int, int>> talked;
    run_ranks(
        8,
        [&](Communicator& comm) {
          std::vector<int32_t> v(1000);
          for (size_t i = 0; i < v.size(); ++i) v[i] = comm.rank() * 1000 + static_cast<int32_t>(i);
          CollectiveOptions o;
          o.algorithm = algo;
          ASSERT_TRUE(comm.allreduce(v.data(), v.data(), v.size(), DataType::kI32, ReduceOp::kSum, o));
          for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], 28000 + 8 * static_cast<int32_t>(i));
        },
        [&](CommConfig& cfg) {
          cfg.failed_links = {{0, 1}};
          cfg.trace = [&](int rank, const TraceEvent& e) {
            std::lock_guard<std::mutex> l(mu);
            if (e.kind == TraceEvent::kSend) talked.insert({std::min(rank, e.peer), std::max(rank, e.peer)});
          };
        });
    EXPECT_EQ(talked.count({0, 1}), 0u) << algorithm_name(algo) << " sent over the failed link 0-1";
    EXPECT_FALSE(talked.empty());
  }
}

}  // namespace
}  // namespace weft::coll::testing
