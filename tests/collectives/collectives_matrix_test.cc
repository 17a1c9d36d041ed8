// ReduceScatter, AllGather and Broadcast over every type (x op), count and
// rank count, one test case per algorithm and rank count. For ReduceScatter
// and AllGather the count is the whole vector (ceil(count / P) per rank).
#include <map>
#include <mutex>
#include <tuple>

#include "harness.h"
#include "values.h"

namespace weft::coll::testing {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 1023, 262147};

struct Case {
  std::string collective;
  Algorithm algo;
  int ranks;
  int per_host;  // ranks per host (hierarchical)
};

class CollectivesMatrix : public ::testing::TestWithParam<Case> {};

void check_reduce_scatter(Communicator& comm, Algorithm algo) {
  const int p = comm.size();
  int combo = 0;
  for (DataType t : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      ++combo;
      for (size_t count : kCounts) {
        if (!runs_count(count, kCounts[4], combo, p)) continue;
        count = (count + static_cast<size_t>(p) - 1) / static_cast<size_t>(p);  // the whole vector is `count`
        const size_t es = dtype_size(t);
        auto in = make_input(t, op, comm.rank(), count * static_cast<size_t>(p));
        std::vector<char> out(count * es + 1);
        CollectiveOptions o;
        o.algorithm = algo;
        o.segment_bytes = count < 2000 ? 64 : 0;
        Status s = comm.reduce_scatter(in.data(), out.data(), count, t, op, o);
        ASSERT_TRUE(s) << s.to_string();
        const Reference& ref = cached_reference(t, op, p, count * static_cast<size_t>(p));
        Reference mine;
        mine.value.assign(ref.value.begin() + static_cast<long>(count * es * static_cast<size_t>(comm.rank())),
                          ref.value.begin() + static_cast<long>(count * es * static_cast<size_t>(comm.rank() + 1)));
        if (!ref.tol.empty()) {
          mine.tol.assign(ref.tol.begin() + static_cast<long>(count * static_cast<size_t>(comm.rank())),
                          ref.tol.begin() + static_cast<long>(count * static_cast<size_t>(comm.rank() + 1)));
        }
        long bad = first_mismatch(t, mine, out.data(), count);
        ASSERT_EQ(bad, -1) << "rank " << comm.rank() << " " << dtype_name(t) << " " << reduce_op_name(op)
                           << " count " << count;
      }
    }
  }
}

void check_allgather(Communicator& comm, Algorithm algo) {
  const int p = comm.size();
  int combo = 0;
  for (DataType t : kAllDataTypes) {
    ++combo;
    for (size_t total : kCounts) {
      if (!runs_count(total, kCounts[4], combo, p)) continue;
      const size_t count = (total + static_cast<size_t>(p) - 1) / static_cast<size_t>(p);  // per rank
      const size_t es = dtype_size(t);
      auto in = make_input(t, ReduceOp::kMin, comm.rank(), count);
      std::vector<char> out(count * es * static_cast<size_t>(p) + 1);
      CollectiveOptions o;
      o.algorithm = algo;
      o.segment_bytes = count < 2000 ? 64 : 0;
      Status s = comm.allgather(in.data(), out.data(), count, t, o);
      ASSERT_TRUE(s) << s.to_string();
      for (int r = 0; r < p; ++r) {
        const auto& want = cached_input(t, ReduceOp::kMin, r, count);
        ASSERT_EQ(0, std::memcmp(want.data(), out.data() + count * es * static_cast<size_t>(r), count * es))
            << "rank " << comm.rank() << " block " << r << " " << dtype_name(t) << " count " << count;
      }
    }
  }
}

void check_broadcast(Communicator& comm) {
  const int p = comm.size();
  int combo = 0;
  for (int root : {0, p - 1, p / 2}) {
    for (DataType t : kAllDataTypes) {
      ++combo;
      for (size_t count : kCounts) {
        if (!runs_count(count, kCounts[4], combo, p)) continue;
        auto buf = make_input(t, ReduceOp::kSum, comm.rank(), count);
        CollectiveOptions o;
        o.segment_bytes = count < 2000 ? 64 : 0;
        Status s = comm.broadcast(buf.data(), count, t, root, o);
        ASSERT_TRUE(s) << s.to_string();
        const auto& want = cached_input(t, ReduceOp::kSum, root, count);
        ASSERT_EQ(0, std::memcmp(want.data(), buf.data(), count * dtype_size(t)))
            << "rank " << comm.rank() << " root " << root << " " << dtype_name(t) << " count " << count;
      }
    }
  }
}

TEST_P(CollectivesMatrix, EveryTypeAndCountMatchesTheReference) {
  const Case c = GetParam();
  run_ranks(
      c.ranks,
      [&](Communicator& comm) {
        if (c.collective == "reduce_scatter") check_reduce_scatter(comm, c.algo);
        if (c.collective == "allgather") check_allgather(comm, c.algo);
        if (c.collective == "broadcast") check_broadcast(comm);
      },
      [&](CommConfig& cfg) { cfg.host = "h" + std::to_string(cfg.rank / c.per_host); });
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int n : {1, 2, 3, 4, 5, 7, 8, 13}) {
    out.push_back({"reduce_scatter", Algorithm::kRing, n, 1});
    out.push_back({"allgather", Algorithm::kRing, n, 1});
    out.push_back({"broadcast", Algorithm::kBinomial, n, 1});
  }
  // Hierarchical: several hosts of several ranks, one host, one rank per host.
  for (auto [n, per] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}, {3, 3}, {4, 2}, {5, 1}, {6, 3}, {7, 7}, {8, 2}, {8, 4}, {13, 1}}) {
    out.push_back({"allgather", Algorithm::kHierarchical, n, per});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Collectives, CollectivesMatrix, ::testing::ValuesIn(cases()), [](const auto& p) {
  return p.param.collective + "_" + std::string(algorithm_name(p.param.algo)) + "_" + std::to_string(p.param.ranks) +
         "ranks_" + std::to_string(p.param.per_host) + "perhost";
});

}  // namespace
}  // namespace weft::coll::testing
