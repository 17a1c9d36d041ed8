// The correctness matrix: every type x op x count for one algorithm and one
// rank count per test case, all in one set of communicators (ranks are
// threads; the transport is WEFT_TEST_TRANSPORT, default loopback).
#include "harness.h"
#include "values.h"

namespace weft::coll::testing {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 1023, 262147};

// Host layouts of the hybrid cases (the others ignore hosts): several hosts
// of several ranks, one host, and one rank per host.
int ranks_per_host(int ranks) {
  switch (ranks) {
    case 4: return 2;
    case 8: return 2;
    case 3: case 7: return ranks;
    default: return 1;
  }
}

class AllreduceMatrix : public ::testing::TestWithParam<std::tuple<Algorithm, int>> {};

TEST_P(AllreduceMatrix, EveryTypeOpAndCountMatchesTheReference) {
  const auto [algo, ranks] = GetParam();
  run_ranks(ranks, [&, algo = algo, ranks = ranks](Communicator& comm) {
    if (algo == Algorithm::kHybrid) {
      ASSERT_EQ(comm.host_count(), ranks / ranks_per_host(ranks));
    }
    int combo = 0;
    std::vector<char> in, out;  // reused: the largest case sizes them once
    for (DataType t : kAllDataTypes) {
      for (ReduceOp op : kAllReduceOps) {
        const Reference& ref = cached_reference(t, op, ranks);
        for (size_t count : kCounts) {
          ++combo;
          if (!runs_count(count, kCounts[4], (combo - 1) / 5, ranks)) continue;
          const size_t bytes = count * dtype_size(t) + 1;
          if (in.size() < bytes) in.resize(bytes), out.resize(bytes);
          fill_input(t, op, comm.rank(), count, in.data());
          // Alternate in-place and out-of-place calls; small segments force
          // the multi-segment pipeline paths on small vectors too.
          const bool in_place = combo % 2 == 0;
          CollectiveOptions o;
          o.algorithm = algo;
          o.segment_bytes = count < 2000 ? 64 : 0;
          Status s = comm.allreduce(in.data(), in_place ? in.data() : out.data(), count, t, op, o);
          ASSERT_TRUE(s) << s.to_string();
          const void* got = in_place ? in.data() : out.data();
          long bad = first_mismatch(t, ref, got, count);
          ASSERT_EQ(bad, -1) << "rank " << comm.rank() << " " << dtype_name(t) << " " << reduce_op_name(op)
                             << " count " << count << ": element " << bad << " is "
                             << load_value(t, got, static_cast<size_t>(bad)) << ", expected "
                             << ref.expected(t, static_cast<size_t>(bad));
        }
      }
    }
  }, [&, ranks = ranks](CommConfig& cfg) { cfg.host = host_name(cfg.rank / ranks_per_host(ranks)); });
}

std::string name_of(const ::testing::TestParamInfo<std::tuple<Algorithm, int>>& info) {
  return std::string(algorithm_name(std::get<0>(info.param))) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(Collectives, AllreduceMatrix,
                         ::testing::Combine(::testing::Values(Algorithm::kHalvingDoubling, Algorithm::kRing,
                                                             Algorithm::kButterfly, Algorithm::kOneShot,
                                                             Algorithm::kHybrid),
                                            ::testing::Values(1, 2, 3, 4, 5, 7, 8, 13)),
                         name_of);

}  // namespace
}  // namespace weft::coll::testing
