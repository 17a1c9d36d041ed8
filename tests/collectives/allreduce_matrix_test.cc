// The correctness matrix: every type x op x count for one algorithm and one
// rank count per test case, all in one set of communicators (ranks are
// threads; the transport is WEFT_TEST_TRANSPORT, default loopback).
#include <map>
#include <mutex>
#include <tuple>

#include "harness.h"
#include "values.h"

namespace weft::coll::testing {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 1023, 262147};

// References depend on (type, op, ranks, count), not on the algorithm: built
// once per process by whichever rank needs one first.
const Reference& reference(DataType t, ReduceOp op, int ranks, size_t count) {
  static std::mutex mu;
  static std::map<std::tuple<DataType, ReduceOp, int, size_t>, Reference> cache;
  std::lock_guard<std::mutex> l(mu);
  auto key = std::make_tuple(t, op, ranks, count);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make_reference(t, op, ranks, count)).first;
  return it->second;
}

class AllreduceMatrix : public ::testing::TestWithParam<std::tuple<Algorithm, int>> {};

TEST_P(AllreduceMatrix, EveryTypeOpAndCountMatchesTheReference) {
  const auto [algo, ranks] = GetParam();
  run_ranks(ranks, [&, algo = algo, ranks = ranks](Communicator& comm) {
    int combo = 0;
    for (DataType t : kAllDataTypes) {
      for (ReduceOp op : kAllReduceOps) {
        for (size_t count : kCounts) {
          ++combo;
          auto in = make_input(t, op, comm.rank(), count);
          std::vector<char> out(in.size());
          // Alternate in-place and out-of-place calls; small segments force
          // the multi-segment pipeline paths on small vectors too.
          const bool in_place = combo % 2 == 0;
          CollectiveOptions o;
          o.algorithm = algo;
          o.segment_bytes = count < 2000 ? 64 : 0;
          Status s = comm.allreduce(in.data(), in_place ? in.data() : out.data(), count, t, op, o);
          ASSERT_TRUE(s) << s.to_string();
          const void* got = in_place ? in.data() : out.data();
          long bad = first_mismatch(t, reference(t, op, ranks, count), got, count);
          ASSERT_EQ(bad, -1) << "rank " << comm.rank() << " " << dtype_name(t) << " " << reduce_op_name(op)
                             << " count " << count << ": element " << bad << " is " << load_value(t, got, static_cast<size_t>(bad))
                             << ", expected " << load_value(t, reference(t, op, ranks, count).value.data(), static_cast<size_t>(bad));
        }
      }
    }
  });
}

std::string name_of(const ::testing::TestParamInfo<std::tuple<Algorithm, int>>& info) {
  return std::string(algorithm_name(std::get<0>(info.param))) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(Collectives, AllreduceMatrix,
                         ::testing::Combine(::testing::Values(Algorithm::kHalvingDoubling, Algorithm::kRing,
                                                             Algorithm::kButterfly),
                                            ::testing::Values(1, 2, 3, 4, 5, 7, 8, 13)),
                         name_of);

}  // namespace
}  // namespace weft::coll::testing
