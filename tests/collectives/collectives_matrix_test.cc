// ReduceScatter, AllGather and Broadcast over every type (x op), count and
// rank count, one test case per algorithm and rank count. For ReduceScatter
// and AllGather the count is the whole vector (ceil(count / P) per rank).
#include <sstream>

#include "harness.h"
#include "values.h"

namespace weft::coll::testing {
namespace {

constexpr size_t kTotals[] = {0, 1, 7, 1023, 262147};

struct Case {
  std::string collective;
  Algorithm algo;
  int ranks;
  int per_host;  // ranks per host (hierarchical)
};

class CollectivesMatrix : public ::testing::TestWithParam<Case> {};

void check_reduce_scatter(Communicator& comm, Algorithm algo) {
  const int p = comm.size();
  std::vector<char> in, out;  // reused
  int combo = 0;
  for (DataType t : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      ++combo;
      const Reference& ref = cached_reference(t, op, p);
      for (size_t count : kTotals) {
        if (!runs_count(count, kTotals[4], combo, p)) continue;
        count = (count + static_cast<size_t>(p) - 1) / static_cast<size_t>(p);  // the whole vector is `count`
        const size_t es = dtype_size(t), all = count * static_cast<size_t>(p);
        if (in.size() < all * es + 1) in.resize(all * es + 1);
        if (out.size() < count * es + 1) out.resize(count * es + 1);
        fill_input(t, op, comm.rank(), all, in.data());
        CollectiveOptions o;
        o.algorithm = algo;
        o.segment_bytes = count < 2000 ? 64 : 0;
        Status s = comm.reduce_scatter(in.data(), out.data(), count, t, op, o);
        ASSERT_TRUE(s) << s.to_string();
        const size_t first = count * static_cast<size_t>(comm.rank());
        long bad = first_mismatch(t, ref, out.data(), count, first);
        ASSERT_EQ(bad, -1) << "rank " << comm.rank() << " " << dtype_name(t) << " " << reduce_op_name(op)
                           << " count " << count << ": element " << bad << " of its block is "
                           << load_value(t, out.data(), static_cast<size_t>(bad)) << ", expected "
                           << ref.expected(t, first + static_cast<size_t>(bad));
      }
    }
  }
}

void check_allgather(Communicator& comm, Algorithm algo) {
  const int p = comm.size();
  std::vector<char> in, out;
  int combo = 0;
  for (DataType t : kAllDataTypes) {
    ++combo;
    for (size_t total : kTotals) {
      if (!runs_count(total, kTotals[4], combo, p)) continue;
      const size_t count = (total + static_cast<size_t>(p) - 1) / static_cast<size_t>(p);  // per rank
      const size_t es = dtype_size(t);
      if (in.size() < count * es + 1) in.resize(count * es + 1);
      if (out.size() < count * es * static_cast<size_t>(p) + 1) out.resize(count * es * static_cast<size_t>(p) + 1);
      fill_input(t, ReduceOp::kMin, comm.rank(), count, in.data());
      CollectiveOptions o;
      o.algorithm = algo;
      o.segment_bytes = count < 2000 ? 64 : 0;
      Status s = comm.allgather(in.data(), out.data(), count, t, o);
      ASSERT_TRUE(s) << s.to_string();
      for (int r = 0; r < p; ++r) {
        ASSERT_TRUE(equals_input(t, ReduceOp::kMin, r, out.data() + count * es * static_cast<size_t>(r), count))
            << "rank " << comm.rank() << " block " << r << " " << dtype_name(t) << " count " << count;
      }
    }
  }
}

void check_broadcast(Communicator& comm) {
  const int p = comm.size();
  std::vector<char> buf;
  int combo = 0;
  for (int root : {0, p - 1, p / 2}) {
    for (DataType t : kAllDataTypes) {
      ++combo;
      for (size_t count : kTotals) {
        if (!runs_count(count, kTotals[4], combo, p)) continue;
        if (buf.size() < count * dtype_size(t) + 1) buf.resize(count * dtype_size(t) + 1);
        fill_input(t, ReduceOp::kSum, comm.rank(), count, buf.data());
        CollectiveOptions o;
        o.segment_bytes = count < 2000 ? 64 : 0;
        Status s = comm.broadcast(buf.data(), count, t, root, o);
        ASSERT_TRUE(s) << s.to_string();
        ASSERT_TRUE(equals_input(t, ReduceOp::kSum, root, buf.data(), count))
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
      [&](CommConfig& cfg) { cfg.host = host_name(cfg.rank / c.per_host); });
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
  // A stream, not operator+ chains: GCC 12 warns falsely (-Wrestrict) on those.
  std::ostringstream name;
  name << p.param.collective << "_" << algorithm_name(p.param.algo) << "_" << p.param.ranks << "ranks_"
       << p.param.per_host << "perhost";
  return name.str();
});

}  // namespace
}  // namespace weft::coll::testing
