// Float min and max of NaNs and signed zeros: every algorithm gives every
// rank the same bits, a NaN on any rank is a NaN everywhere, and -0 < +0
// (IEEE 754-2019 minimum/maximum, collectives/reduce.cc). The butterfly
// reduces each pair in opposite operand order on its two sides, so a kernel
// that keeps its first operand on a tie or a NaN split the ranks.
#include <cmath>
#include <cstring>
#include <mutex>

#include "harness.h"
#include "values.h"

namespace weft::coll::testing {
namespace {

// Element i of `rank`'s input, chosen so that ties and NaNs meet from
// either side: slot i % 4 == 0 is a NaN on rank (i / 4) % ranks only;
// 1 is +0 on even ranks, -0 on odd ones; 2 is -0 on rank 0 only and +0
// elsewhere; 3 is a finite value, the rank's own.
double special_value(int rank, int ranks, size_t i) {
  switch (i % 4) {
    case 0: return static_cast<int>((i / 4) % static_cast<size_t>(ranks)) == rank ? std::nan("") : 1.0 + rank;
    case 1: return rank % 2 ? -0.0 : 0.0;
    case 2: return rank == 0 ? -0.0 : 0.0;
    default: return static_cast<double>((rank * 7 + static_cast<int>(i)) % 11) - 5.0;
  }
}

// Hosts of equal size, as hybrid needs: several hosts of two ranks, one
// host of seven (shm only), one rank per host.
int special_ranks_per_host(int ranks) { return ranks == 4 ? 2 : ranks == 7 ? 7 : 1; }

using SpecialCase = std::tuple<Algorithm, int, DataType>;
class AllreduceSpecialValues : public ::testing::TestWithParam<SpecialCase> {};

TEST_P(AllreduceSpecialValues, MinAndMaxGiveEveryRankTheSameBitsNaNWinsAndMinusZeroIsBelowPlusZero) {
  const auto [algo, ranks, t] = GetParam();
  constexpr size_t kCount = 4 * 13 + 3;  // every slot kind, a NaN on every rank, an odd tail
  const size_t es = dtype_size(t);
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
    std::mutex mu;
    std::vector<std::vector<char>> results(static_cast<size_t>(ranks));
    run_ranks(ranks, [&, algo = algo, ranks = ranks, t = t](Communicator& comm) {
      std::vector<char> v(kCount * es);
      for (size_t i = 0; i < kCount; ++i) store_value(t, v.data(), i, special_value(comm.rank(), ranks, i));
      CollectiveOptions o;
      o.algorithm = algo;
      o.segment_bytes = 64;  // several segments: the pipelined paths too
      Status s = comm.allreduce(v.data(), v.data(), kCount, t, op, o);
      ASSERT_TRUE(s) << s.to_string();
      std::lock_guard lock(mu);
      results[static_cast<size_t>(comm.rank())] = std::move(v);
    }, [&, ranks = ranks](CommConfig& cfg) { cfg.host = host_name(cfg.rank / special_ranks_per_host(ranks)); });
    if (::testing::Test::HasFatalFailure() || ::testing::Test::IsSkipped()) return;
    for (int r = 1; r < ranks; ++r) {
      ASSERT_EQ(0, std::memcmp(results[0].data(), results[static_cast<size_t>(r)].data(), kCount * es))
          << reduce_op_name(op) << ": rank " << r << " differs from rank 0";
    }
    const std::vector<char>& got = results[0];
    for (size_t i = 0; i < kCount; ++i) {
      const double x = load_value(t, got.data(), i);
      switch (i % 4) {
        case 0: EXPECT_TRUE(std::isnan(x)) << reduce_op_name(op) << " element " << i << " is " << x; break;
        case 1:
        case 2:
          EXPECT_EQ(x, 0.0) << i;
          EXPECT_EQ(std::signbit(x), op == ReduceOp::kMin) << reduce_op_name(op) << " element " << i;
          break;
        default: {
          double want = special_value(0, ranks, i);
          for (int r = 1; r < ranks; ++r) {
            const double y = special_value(r, ranks, i);
            want = op == ReduceOp::kMin ? std::min(want, y) : std::max(want, y);
          }
          EXPECT_EQ(x, want) << reduce_op_name(op) << " element " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, AllreduceSpecialValues,
    ::testing::Combine(::testing::Values(Algorithm::kHalvingDoubling, Algorithm::kRing, Algorithm::kButterfly,
                                         Algorithm::kOneShot, Algorithm::kHybrid),
                       ::testing::Values(2, 3, 4, 7),
                       ::testing::Values(DataType::kF32, DataType::kF64, DataType::kF16, DataType::kBF16)),
    [](const auto& p) {
      return std::string(algorithm_name(std::get<0>(p.param))) + "_" + std::to_string(std::get<1>(p.param)) +
             "ranks_" + std::string(dtype_name(std::get<2>(p.param)));
    });

}  // namespace
}  // namespace weft::coll::testing
