// kAuto's cost model (collectives/cost_model.h): each algorithm's predicted
// time is its real steps at the transports' constants, and hybrid runs only
// where its predicted time is the smallest.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "weft/collectives/communicator.h"

namespace weft::coll {
namespace {

// Constants that count: α = 1 µs, β and γ 0 (steps); or β = 1 ns/B, α and
// γ ~0 (bytes moved, in ns); or γ = 1 ns/B (bytes reduced).
Tuning counting(double alpha, double beta, double gamma, double shm_alpha = -1) {
  Tuning t;
  t.transports["tcp"] = {alpha, beta, gamma};
  t.transports["shm"] = {shm_alpha < 0 ? alpha : shm_alpha, beta, gamma};
  return t;
}

struct Case {
  Algorithm a;
  int hosts, per_host;
  double steps;        // α = 1 µs each
  double moved_ns;     // per rank, β = 1 ns/B, for 12288 B (divisible by 2..8, 3, 6)
  double reduced_ns;   // per rank, γ = 1 ns/B, for 12288 B
};
class ModelSteps : public ::testing::TestWithParam<Case> {};

// Thakur, Rabenseifner & Gropp (IJHPCA 2005) sections 3-4, with MPICH's
// fold for p != 2^k (one-way vector before, result back after).
TEST_P(ModelSteps, PredictionIsTheAlgorithmsStepsAndBytes) {
  const Case& c = GetParam();
  const double n = 12288;
  const SelectionInput in = SelectionInput::blocks("tcp", c.hosts, c.per_host, "shm");
  const double tiny = 1e-12;
  EXPECT_NEAR(predict_allreduce_us(c.a, counting(1, tiny, tiny), in, 0), c.steps, 1e-6);
  EXPECT_NEAR(predict_allreduce_us(c.a, counting(tiny, 1, tiny), in, static_cast<size_t>(n)) * 1e3, c.moved_ns, 1e-3);
  EXPECT_NEAR(predict_allreduce_us(c.a, counting(tiny, tiny, 1), in, static_cast<size_t>(n)) * 1e3, c.reduced_ns, 1e-3);
}
INSTANTIATE_TEST_SUITE_P(
    Algorithms, ModelSteps,
    ::testing::Values(
        // butterfly: log2 p steps of n, each reduced
        Case{Algorithm::kButterfly, 1, 8, 3, 3 * 12288, 3 * 12288},
        // 6 ranks: fold (n one way, reduced), 2 steps of n, unfold (n)
        Case{Algorithm::kButterfly, 1, 6, 4, 4 * 12288, 3 * 12288},
        // HD: 2 log2 p steps, n/2 + n/4 + n/8 each way, reduced once
        Case{Algorithm::kHalvingDoubling, 1, 8, 6, 2 * (6144 + 3072 + 1536), 6144 + 3072 + 1536},
        Case{Algorithm::kHalvingDoubling, 1, 3, 4, 12288 + 2 * 6144 + 12288, 12288 + 6144},
        // ring: 2 (p - 1) steps of n/p, the first p - 1 reduced
        Case{Algorithm::kRing, 1, 8, 14, 14 * 1536, 7 * 1536},
        Case{Algorithm::kRing, 1, 3, 4, 4 * 4096, 2 * 4096},
        // one-shot: one step of p - 1 messages of n, (p - 1) n reduced
        Case{Algorithm::kOneShot, 1, 4, 3, 3 * 12288, 3 * 12288},
        // hybrid, 2 hosts x 4: ring reduce-scatter (3 steps of n/4), HD
        // between 2 hosts on n/4 (2 steps of n/8), ring allgather (3)
        Case{Algorithm::kHybrid, 2, 4, 8, 6 * 3072 + 2 * 1536, 3 * 3072 + 1536},
        // 2 hosts x 3: 2 + 2 + 2 steps of n/3, n/6 between the hosts
        Case{Algorithm::kHybrid, 2, 3, 6, 4 * 4096 + 2 * 2048, 2 * 4096 + 2048}));

TEST(CostModel, AStepAcrossHostsCostsTheNetworksLatency) {
  // 2 hosts x 2 ranks, tcp α 10, shm α 1: butterfly's first step stays on
  // the host (shm), the second crosses (tcp).
  const SelectionInput in = SelectionInput::blocks("tcp", 2, 2, "shm");
  EXPECT_NEAR(predict_allreduce_us(Algorithm::kButterfly, counting(10, 1e-12, 1e-12, 1), in, 0), 11, 1e-6);
  // ring: every step has a message between hosts.
  EXPECT_NEAR(predict_allreduce_us(Algorithm::kRing, counting(10, 1e-12, 1e-12, 1), in, 0), 60, 1e-6);
  // hybrid: 1 + 1 shm steps, 2 tcp steps.
  EXPECT_NEAR(predict_allreduce_us(Algorithm::kHybrid, counting(10, 1e-12, 1e-12, 1), in, 0), 22, 1e-6);
}

TEST(CostModel, MessagesPastTheCacheCostBetaFar) {
  Tuning t = counting(1e-12, 1, 1e-12);
  t.transports["tcp"].cache_bytes = 1000;
  t.transports["tcp"].beta_far_ns_per_byte = 3;
  const SelectionInput two = SelectionInput::blocks("tcp", 1, 2);
  // butterfly on 2 ranks: one step of n.
  EXPECT_NEAR(predict_allreduce_us(Algorithm::kButterfly, t, two, 1000) * 1e3, 1000, 1e-6);
  EXPECT_NEAR(predict_allreduce_us(Algorithm::kButterfly, t, two, 3000) * 1e3, 1000 + 2000 * 3, 1e-6);
}

TEST(CostModel, HdInPiecesIsOneWholeHdPerPiece) {
  Tuning t = counting(1, 1e-12, 1e-12);
  t.transports["tcp"].hd_piece_bytes = 4096;
  const SelectionInput four = SelectionInput::blocks("tcp", 1, 4);
  EXPECT_NEAR(predict_allreduce_us(Algorithm::kHalvingDoubling, t, four, 4096), 4, 1e-6);
  EXPECT_NEAR(predict_allreduce_us(Algorithm::kHalvingDoubling, t, four, 3 * 4096 + 1), 16, 1e-6);
  EXPECT_EQ(select_allreduce({}, t, four).hd_piece_bytes, 4096u);
}

// Hybrid is never the pick of a tiny call with the built-in constants on
// hosts of 2, 4 or 8 ranks (a power of two: the flat algorithms' steps
// between hosts are as few as hybrid's, and it adds steps inside the host).
TEST(CostModel, HybridIsNeverPickedForTinyCallsOnHostsOfPowerOfTwoRanks) {
  const Tuning t = built_in_tuning();
  for (int hosts : {2, 3, 4, 5, 8, 16}) {
    for (int per : {2, 4, 8}) {
      const AllreducePicks p = select_allreduce({}, t, SelectionInput::blocks("tcp", hosts, per, "shm"));
      for (size_t bytes : {size_t{1}, size_t{4}, size_t{16}, size_t{256}, size_t{1024}, size_t{4096}}) {
        EXPECT_NE(p.at(bytes), Algorithm::kHybrid) << hosts << " hosts x " << per << ", " << bytes << " B: " << p.describe();
      }
    }
  }
}

// Hybrid never below the inter-host transport's n½ = α/β, even where the
// model prices it cheaper: on 2 hosts of 3 ranks the flat butterfly takes 4
// inter-host steps (fold, 2 exchanges, unfold) and hybrid 2 between hosts
// and 4 inside them, yet a 4 B call runs butterfly (selection.cc says why).
TEST(CostModel, HybridOnlyFromTheInterHostHalfBandwidthLength) {
  const Tuning t = built_in_tuning();
  const double tcp = t.of("tcp").alpha_us, shm = t.of("shm").alpha_us, tiny = 0.01;  // 4 B cost ~0.002 us
  const size_t n_half = static_cast<size_t>(tcp * 1e3 / t.of("tcp").beta_ns_per_byte);
  for (const auto& [hosts, per] : {std::pair{2, 3}, std::pair{4, 3}, std::pair{2, 4}, std::pair{8, 2}, std::pair{2, 6}}) {
    const SelectionInput in = SelectionInput::blocks("tcp", hosts, per, "shm");
    const AllreducePicks p = select_allreduce({}, t, in);
    for (size_t b = 1; b < n_half; b = b * 2 + 1) {
      EXPECT_NE(p.at(b), Algorithm::kHybrid) << hosts << " x " << per << " at " << b << " B: " << p.describe();
    }
  }
  const SelectionInput in = SelectionInput::blocks("tcp", 2, 3, "shm");
  EXPECT_NEAR(predict_allreduce_us(Algorithm::kButterfly, t, in, 4), 4 * tcp, tiny);
  EXPECT_NEAR(predict_allreduce_us(Algorithm::kHybrid, t, in, 4), 2 * tcp + 4 * shm, tiny);
  EXPECT_EQ(select_allreduce({}, t, in).at(4), Algorithm::kButterfly);
}

// Hybrid for large calls where it is predicted fastest: hosts of ranks not
// a power of two, and the sizes where the flat HD's messages inside a host
// leave the cache and hybrid's quarter-size ring steps do not.
TEST(CostModel, HybridIsPickedForLargeCallsWhereItIsPredictedFastest) {
  const Tuning t = built_in_tuning();
  Selection s;
  for (const auto& [hosts, per, bytes] : {std::tuple{2, 3, size_t{64} << 20}, std::tuple{4, 3, size_t{64} << 20},
                                          std::tuple{2, 6, size_t{64} << 20}, std::tuple{2, 4, size_t{4} << 20}}) {
    const SelectionInput in = SelectionInput::blocks("tcp", hosts, per, "shm");
    const AllreducePicks p = select_allreduce(s, t, in);
    EXPECT_EQ(p.at(bytes), Algorithm::kHybrid) << hosts << " hosts x " << per << ": " << p.describe();
    for (Algorithm other : {Algorithm::kButterfly, Algorithm::kHalvingDoubling, Algorithm::kRing}) {
      EXPECT_LT(predict_allreduce_us(Algorithm::kHybrid, t, in, bytes), predict_allreduce_us(other, t, in, bytes))
          << hosts << " hosts x " << per << " against " << algorithm_name(other);
    }
    s.hybrid_when_multi_host = false;
    EXPECT_FALSE(select_allreduce(s, t, in).uses(Algorithm::kHybrid)) << "hybrid_when_multi_host = false";
    s.hybrid_when_multi_host = true;
    SelectionInput no_order = in;
    no_order.hybrid = false;  // failed links no order of the hosts avoids
    EXPECT_FALSE(select_allreduce(s, t, no_order).uses(Algorithm::kHybrid)) << "hybrid = false";
    EXPECT_EQ(predict_allreduce_us(Algorithm::kHybrid, t, no_order, bytes), HUGE_VAL);
  }
  EXPECT_FALSE(select_allreduce(s, t, SelectionInput::blocks("tcp", 1, 6)).uses(Algorithm::kHybrid)) << "one host";
}

TEST(CostModel, ARoutePlanLeavesButterflyAndThePlansAlgorithm) {
  for (Algorithm planned : {Algorithm::kHalvingDoubling, Algorithm::kRing}) {
    SelectionInput in = SelectionInput::blocks("tcp", 2, 3, "shm");
    in.planned = planned;
    const AllreducePicks p = select_allreduce({}, built_in_tuning(), in);
    EXPECT_EQ(p.at(4), Algorithm::kButterfly);
    EXPECT_EQ(p.at(size_t{1} << 30), planned) << p.describe();
    for (int i = 0; i < p.count; ++i) {
      const Algorithm a = p.ranges[static_cast<size_t>(i)].algorithm;
      EXPECT_TRUE(a == Algorithm::kButterfly || a == planned) << p.describe();
    }
  }
}

}  // namespace
}  // namespace weft::coll
