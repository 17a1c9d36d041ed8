// The collective engine moves exactly the flows of routing's schedules — the
// traffic the link-load checker judges and the route planner routes.
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "harness.h"
#include "weft/routing/schedule.h"

namespace weft::coll::testing {
namespace {

using Key = std::tuple<int, std::string, int, int>;  // src, phase, distance, dst

class ScheduleConformance
    : public ::testing::TestWithParam<std::tuple<routing::Collective, int, size_t>> {};

TEST_P(ScheduleConformance, BytesSentPerStepAndPeerEqualTheSchedule) {
  const auto [coll, ranks, count] = GetParam();
  std::mutex mu;
  std::map<Key, uint64_t> moved;
  std::vector<std::pair<std::string, int>> step_of(static_cast<size_t>(ranks));
  run_ranks(
      ranks,
      [&, coll = coll, count = count](Communicator& comm) {
        std::vector<float> v(count, 1.0f);
        CollectiveOptions o;
        o.algorithm = coll == routing::Collective::kAllreduceHd ? Algorithm::kHalvingDoubling : Algorithm::kRing;
        o.segment_bytes = 40;  // many segments: the sum per step must still match
        Status s = comm.allreduce(v.data(), v.data(), count, DataType::kF32, ReduceOp::kSum, o);
        ASSERT_TRUE(s) << s.to_string();
        for (float x : v) ASSERT_EQ(x, static_cast<float>(comm.size()));
      },
      [&](CommConfig& cfg) {
        cfg.trace = [&](int rank, const TraceEvent& e) {
          std::lock_guard<std::mutex> l(mu);
          auto& cur = step_of[static_cast<size_t>(rank)];
          if (e.kind == TraceEvent::kStep) {
            cur = {std::string(e.phase), e.distance};
          } else if (e.bytes > 0) {
            moved[{rank, cur.first, cur.second, e.peer}] += e.bytes;
          }
        };
      });
  auto sched = routing::build_schedule(coll, ranks, count, 4);
  ASSERT_TRUE(sched);
  std::map<Key, uint64_t> planned;
  for (const auto& st : sched->steps) {
    for (const auto& f : st.flows) {
      if (f.bytes > 0) planned[{f.src, st.phase, st.distance, f.dst}] += f.bytes;
    }
  }
  EXPECT_EQ(moved, planned);
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, ScheduleConformance,
    ::testing::Combine(::testing::Values(routing::Collective::kAllreduceHd, routing::Collective::kAllreduceRing),
                       ::testing::Values(2, 3, 5, 6, 8, 13), ::testing::Values(size_t{7}, size_t{1000})),
    [](const auto& p) {
      return std::string(std::get<0>(p.param) == routing::Collective::kAllreduceHd ? "hd" : "ring") + "_" +
             std::to_string(std::get<1>(p.param)) + "ranks_" + std::to_string(std::get<2>(p.param));
    });

}  // namespace
}  // namespace weft::coll::testing
