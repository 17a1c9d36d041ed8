// HD AllReduce in consecutive pieces (SelectionRule::hd_piece_bytes,
// collectives/algorithms/pieces.h): exact results at awkward counts and
// piece sizes, each piece moving exactly its own HD schedule in vector
// order, and a route plan's rounds keeping HD whole.
#include <climits>
#include <cstdint>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "harness.h"
#include "rounds_plan.h"
#include "values.h"
#include "weft/routing/gates.h"
#include "weft/routing/schedule.h"

namespace weft::coll::testing {
namespace {

// Every transport, HD in pieces of `piece` bytes, HD from 0 B.
void use_pieces(CommConfig& cfg, size_t piece) {
  cfg.selection.rules = {{"*", INT_MAX, 0, SIZE_MAX, 0, piece}};
}

class HdPiecesExact : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

// 4100 B holds no whole number of 8-byte elements; 262147 and 1023 leave a
// last piece of 3 (i32 at 4096 B) or a few elements, fewer than one per rank.
TEST_P(HdPiecesExact, IntegerResultsAreExactAtAwkwardCounts) {
  const auto [ranks, piece] = GetParam();
  constexpr size_t kCounts[] = {0, 1, 7, 1023, 2051, 262147};
  run_ranks(
      ranks,
      [&, ranks = ranks](Communicator& comm) {
        std::vector<char> in, out;
        int combo = 0;
        for (DataType t : {DataType::kI32, DataType::kI64, DataType::kU8}) {
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax}) {
            const Reference& ref = cached_reference(t, op, ranks);
            for (size_t count : kCounts) {
              const size_t bytes = count * dtype_size(t) + 1;
              if (in.size() < bytes) in.resize(bytes), out.resize(bytes);
              fill_input(t, op, comm.rank(), count, in.data());
              const bool in_place = ++combo % 2 == 0;
              CollectiveOptions o;
              o.algorithm = Algorithm::kHalvingDoubling;
              Status s = comm.allreduce(in.data(), in_place ? in.data() : out.data(), count, t, op, o);
              ASSERT_TRUE(s) << s.to_string();
              const void* got = in_place ? in.data() : out.data();
              const long bad = first_mismatch(t, ref, got, count);
              ASSERT_EQ(bad, -1) << "rank " << comm.rank() << " " << dtype_name(t) << " " << reduce_op_name(op)
                                 << " count " << count << " in pieces of " << piece << " B: element " << bad
                                 << " is " << load_value(t, got, static_cast<size_t>(bad)) << ", expected "
                                 << ref.expected(t, static_cast<size_t>(bad));
            }
          }
        }
      },
      [piece = piece](CommConfig& cfg) { use_pieces(cfg, piece); });
}

INSTANTIATE_TEST_SUITE_P(Collectives, HdPiecesExact,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 7),
                                            ::testing::Values(size_t{4096}, size_t{4100}, size_t{12345})),
                         [](const auto& p) {
                           return std::to_string(std::get<0>(p.param)) + "ranks_" +
                                  std::to_string(std::get<1>(p.param)) + "B";
                         });

// One rank's moves, step by step: (phase, distance, peer, bytes).
using Move = std::tuple<std::string, int, int, uint64_t>;

// What HD in pieces of `piece` bytes must move: for each piece in vector
// order, the flows of HD's schedule for that piece's count, step by step.
std::vector<std::vector<Move>> planned_moves(int ranks, size_t count, size_t esize, size_t piece) {
  std::vector<std::vector<Move>> out(static_cast<size_t>(ranks));
  const size_t per = piece / esize;
  for (size_t lo = 0; lo < count; lo += per) {
    const size_t n = std::min(per, count - lo);
    auto sched = routing::build_schedule(routing::Collective::kAllreduceHd, ranks, n, esize);
    EXPECT_TRUE(sched);
    if (!sched) return out;
    for (const auto& st : sched->steps) {
      for (const auto& f : st.flows) {
        if (f.bytes > 0) out[static_cast<size_t>(f.src)].emplace_back(st.phase, st.distance, f.dst, f.bytes);
      }
    }
  }
  return out;
}

// Records each rank's moves from the trace: a step event opens a step; the
// step's sends add up; steps that sent nothing are dropped.
struct MoveLog {
  std::mutex mu;
  std::vector<std::vector<Move>> moves;
  explicit MoveLog(int ranks) : moves(static_cast<size_t>(ranks)) {}
  void install(CommConfig& cfg) {
    cfg.trace = [this](int rank, const TraceEvent& e) {
      std::lock_guard<std::mutex> l(mu);
      auto& m = moves[static_cast<size_t>(rank)];
      if (e.kind == TraceEvent::kStep) {
        m.emplace_back(std::string(e.phase), e.distance, -1, 0);
      } else if (e.bytes > 0 && !m.empty()) {
        std::get<2>(m.back()) = e.peer;
        std::get<3>(m.back()) += e.bytes;
      }
    };
  }
  std::vector<std::vector<Move>> sent() {
    auto out = moves;
    for (auto& m : out) std::erase_if(m, [](const Move& x) { return std::get<3>(x) == 0; });
    return out;
  }
};

class HdPiecesSchedule : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(HdPiecesSchedule, EachPieceMovesItsOwnScheduleInVectorOrder) {
  const auto [ranks, count] = GetParam();
  constexpr size_t kPiece = 4096;
  MoveLog log(ranks);
  run_ranks(
      ranks,
      [count = count](Communicator& comm) {
        std::vector<int32_t> v(count, comm.rank() + 1);
        CollectiveOptions o;
        o.algorithm = Algorithm::kHalvingDoubling;
        Status s = comm.allreduce(v.data(), v.data(), count, DataType::kI32, ReduceOp::kSum, o);
        ASSERT_TRUE(s) << s.to_string();
        const int32_t want = comm.size() * (comm.size() + 1) / 2;
        for (int32_t x : v) ASSERT_EQ(x, want);
      },
      [&](CommConfig& cfg) {
        use_pieces(cfg, kPiece);
        log.install(cfg);
      });
  const auto want = planned_moves(ranks, count, sizeof(int32_t), kPiece);
  const auto got = log.sent();
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(got[static_cast<size_t>(r)], want[static_cast<size_t>(r)])
        << "rank " << r << ": " << count << " i32 in pieces of " << kPiece << " B";
  }
}

// 1024 i32 fill a piece: 3 pieces and a last of 3 elements; 1000 is one
// piece (the whole vector: no wrapper).
INSTANTIATE_TEST_SUITE_P(Collectives, HdPiecesSchedule,
                         ::testing::Combine(::testing::Values(2, 3, 5, 8), ::testing::Values(size_t{3075}, size_t{1000})),
                         [](const auto& p) {
                           return std::to_string(std::get<0>(p.param)) + "ranks_" + std::to_string(std::get<1>(p.param));
                         });

// A route plan's rounds describe whole HD steps (routing/gates.h): with
// gates bound HD stays whole whatever the rule's piece, one token per gate.
TEST(HdPieces, RoutePlanRoundsKeepHdWhole) {
  const int n = 5;
  const size_t count = 3075;
  const routing::RoutePlan plan = rounds_plan(n, 2, 1, 1);
  auto gates = routing::plan_gates(plan);
  ASSERT_TRUE(gates && !gates->empty()) << "the synthetic plan must gate";
  MoveLog log(n);
  std::mutex mu;
  int tokens = 0;
  run_ranks(
      n,
      [&](Communicator& comm) {
        std::vector<int32_t> v(count, 1);
        CollectiveOptions o;
        o.algorithm = Algorithm::kHalvingDoubling;
        Status s = comm.allreduce(v.data(), v.data(), count, DataType::kI32, ReduceOp::kSum, o);
        ASSERT_TRUE(s) << s.to_string();
        EXPECT_EQ(v[count - 1], n);
      },
      [&](CommConfig& cfg) {
        cfg.transport = "loopback";
        cfg.plan = plan;
        use_pieces(cfg, 4096);
        log.install(cfg);
        auto moves = cfg.trace;
        cfg.trace = [&, moves](int rank, const TraceEvent& e) {
          if (e.kind == TraceEvent::kSend && e.bytes == 0) {
            std::lock_guard<std::mutex> l(mu);
            ++tokens;
          }
          moves(rank, e);
        };
      });
  EXPECT_EQ(tokens, static_cast<int>(gates->size())) << "one token per gate: one whole HD";
  EXPECT_EQ(log.sent(), planned_moves(n, count, sizeof(int32_t), count * sizeof(int32_t)));
}

}  // namespace
}  // namespace weft::coll::testing
