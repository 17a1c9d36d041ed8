#include <climits>
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

// Hybrid's talking pairs under `map` (group index -> rank) for hosts of m
// consecutive group indices: ring neighbours inside each host, HD partners
// (routing::hd_layout) between the equal local ranks of the hosts.
std::set<std::pair<int, int>> hybrid_pairs(const std::vector<int>& map, int m) {
  const int n = static_cast<int>(map.size()) / m;
  std::set<std::pair<int, int>> out;
  auto add = [&](int gx, int gy) {
    const int x = map[static_cast<size_t>(gx)], y = map[static_cast<size_t>(gy)];
    if (x != y) out.insert({std::min(x, y), std::max(x, y)});
  };
  for (int h = 0; h < n; ++h) {
    for (int l = 0; l < m; ++l) add(h * m + l, h * m + (l + 1) % m);
  }
  for (auto [a, b] : internal::talking_pairs(Algorithm::kHalvingDoubling, n)) {
    for (int l = 0; l < m; ++l) add(a * m + l, b * m + l);
  }
  return out;
}

std::vector<int> blocks_of(int hosts, int per_host) {
  std::vector<int> host_of;
  for (int r = 0; r < hosts * per_host; ++r) host_of.push_back(r / per_host);
  return host_of;
}

class RemapHybrid : public ::testing::TestWithParam<std::tuple<int, int>> {};

// Failed links between equal local ranks of hosts 0-1 and 2-(n-1), and one
// between different local ranks (never talked over): the hosts move as
// wholes, each keeping its ranks in order, and no talking pair is failed.
TEST_P(RemapHybrid, WholeHostsMoveSoThatNoTalkingPairIsAFailedLink) {
  const auto [hosts, m] = GetParam();
  const std::vector<std::pair<int, int>> failed = {{0, m}, {2 * m + 1, (hosts - 1) * m + 1}, {1, 3 * m}};
  auto map = internal::remap_hybrid(blocks_of(hosts, m), failed);
  ASSERT_TRUE(map) << map.status().to_string();
  ASSERT_EQ(map->size(), static_cast<size_t>(hosts * m));
  for (int h = 0; h < hosts; ++h) {
    const int first = (*map)[static_cast<size_t>(h * m)];
    EXPECT_EQ(first % m, 0) << "host position " << h << " does not start a host";
    for (int l = 0; l < m; ++l) EXPECT_EQ((*map)[static_cast<size_t>(h * m + l)], first + l) << "position " << h;
  }
  const auto talk = hybrid_pairs(*map, m);
  for (auto [x, y] : failed) EXPECT_EQ(talk.count({std::min(x, y), std::max(x, y)}), 0u) << x << "-" << y;
  // Identity talks over the first failed link (hosts 0 and 1 are HD
  // partners): the test would pass for no reason otherwise.
  std::vector<int> identity(static_cast<size_t>(hosts * m));
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int>(i);
  EXPECT_EQ(hybrid_pairs(identity, m).count({0, m}), 1u);
}

INSTANTIATE_TEST_SUITE_P(Collectives, RemapHybrid,
                         ::testing::Combine(::testing::Values(4, 5, 7, 8), ::testing::Values(2, 3)));

TEST(RemapHybrid, NoFailedLinksIsTheIdentity) {
  auto map = internal::remap_hybrid(blocks_of(3, 2), {});
  ASSERT_TRUE(map) << map.status().to_string();
  EXPECT_EQ(*map, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(RemapHybrid, HostsInterleavedInRankOrderMoveAsWholes) {
  // Ranks 0, 2 on host A, 1, 3 on host B, 4, 6 on C, 5, 7 on D; the link
  // 0-1 joins local rank 0 of A and B, HD partners in host order A B C D.
  auto map = internal::remap_hybrid({0, 1, 0, 1, 2, 3, 2, 3}, {{0, 1}});
  ASSERT_TRUE(map) << map.status().to_string();
  EXPECT_EQ(*map, (std::vector<int>{1, 3, 4, 6, 5, 7, 0, 2}));
}

// Hosts that are not blocks of ranks, and failed links hybrid never talks
// over: the identity (the group a hybrid route plan's gates bind), not the
// hosts laid end to end.
TEST(RemapHybrid, NothingToAvoidIsTheIdentityAlsoOnInterleavedHosts) {
  // None; local ranks 0 and 1 (never partners across hosts); and hosts 0
  // and 3 (rank 5 is host 3's local 0), which 4-host HD never pairs.
  for (const auto& failed : {std::vector<std::pair<int, int>>{}, std::vector<std::pair<int, int>>{{0, 3}},
                             std::vector<std::pair<int, int>>{{0, 5}}}) {
    auto map = internal::remap_hybrid({0, 1, 0, 1, 2, 3, 2, 3}, failed);
    ASSERT_TRUE(map) << map.status().to_string();
    EXPECT_EQ(*map, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7})) << failed.size() << " failed link(s)";
  }
}

TEST(RemapHybrid, AFailedLinkBetweenRingNeighboursOfOneHostIsRefusedNamingIt) {
  auto map = internal::remap_hybrid(blocks_of(2, 4), {{5, 6}});
  ASSERT_FALSE(map);
  EXPECT_EQ(map.status().message(),
            "hybrid allreduce cannot avoid the failed link 5-6: both ranks are on one host and neighbours in its "
            "ring (local ranks 1 and 2 of 4)");
  // Local ranks 0 and 2 of 4 are not neighbours: nothing to avoid.
  EXPECT_TRUE(internal::remap_hybrid(blocks_of(2, 4), {{4, 6}}));
}

TEST(RemapHybrid, TwoHostsJoinedByAFailedLinkHaveNoOrder) {
  auto map = internal::remap_hybrid(blocks_of(2, 3), {{1, 4}});
  ASSERT_FALSE(map);
  EXPECT_EQ(map.status().message(),
            "no order of 2 hosts keeps hybrid allreduce's halving-doubling between hosts off the 1 failed link(s) "
            "that join ranks of equal local index");
  EXPECT_TRUE(internal::remap_hybrid(blocks_of(2, 3), {{1, 5}})) << "local ranks 1 and 2 never talk";
}

TEST(RemapHybrid, UnequalHostsAreRefused) {
  auto map = internal::remap_hybrid({0, 0, 1}, {{0, 2}});
  ASSERT_FALSE(map);
  EXPECT_EQ(map.status().message(), "allreduce: hybrid needs the same number of ranks on every host");
}

// 4 hosts of 2, link 0-2 (local rank 0 of hosts 0 and 1) cut: forced hybrid
// runs exactly and never sends over it; with no order possible (2 hosts)
// kAuto leaves hybrid out, where without the link it takes it.
TEST(RemapHybrid, HybridWithACutLinkNeverSendsOverItAndIsCorrect) {
  std::mutex mu;
  std::set<std::pair<int, int>> talked;
  run_ranks(
      8,
      [&](Communicator& comm) {
        std::vector<int32_t> v(1001);
        for (size_t i = 0; i < v.size(); ++i) v[i] = comm.rank() * 1000 + static_cast<int32_t>(i);
        CollectiveOptions o;
        o.algorithm = Algorithm::kHybrid;
        ASSERT_TRUE(comm.allreduce(v.data(), v.data(), v.size(), DataType::kI32, ReduceOp::kSum, o));
        for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], 28000 + 8 * static_cast<int32_t>(i));
      },
      [&](CommConfig& cfg) {
        cfg.host = host_name(cfg.rank / 2);
        cfg.failed_links = {{0, 2}};
        cfg.trace = [&](int rank, const TraceEvent& e) {
          std::lock_guard<std::mutex> l(mu);
          if (e.kind == TraceEvent::kSend) talked.insert({std::min(rank, e.peer), std::max(rank, e.peer)});
        };
      });
  EXPECT_EQ(talked.count({0, 2}), 0u) << "hybrid sent over the failed link 0-2";
  EXPECT_EQ(talked.count({1, 3}), 0u) << "hosts 0 and 1 are no longer HD partners for local rank 1 either";
  EXPECT_EQ(talked.count({2, 3}), 1u) << "host 1's ring";
}

TEST(RemapHybrid, AutoLeavesHybridOutWhereNoOrderAvoidsTheFailedLinks) {
  for (const bool cut : {false, true}) {
    run_ranks(
        4,
        [&](Communicator& comm) {
          EXPECT_EQ(comm.auto_allreduce().uses(Algorithm::kHybrid), !cut) << comm.auto_allreduce().describe();
          std::vector<int32_t> v(4096, comm.rank());
          ASSERT_TRUE(comm.allreduce(v.data(), v.data(), v.size(), DataType::kI32, ReduceOp::kSum));
          EXPECT_EQ(v[4095], 6);
          auto forced = comm.allreduce_rank_map(Algorithm::kHybrid);
          EXPECT_EQ(forced.is_ok(), !cut);
        },
        [&](CommConfig& cfg) {
          cfg.host = host_name(cfg.rank / 2);
          cfg.selection.rules = {{"*", INT_MAX, 64, SIZE_MAX, 0, 0, 1024}};
          if (cut) cfg.failed_links = {{0, 2}};
        });
  }
}

}  // namespace
}  // namespace weft::coll::testing
