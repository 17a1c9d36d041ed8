// Communicator::register_buffer and where a call's buffer is placed
// (collectives/registry.cc), without RDMA: pinning-loopback
// (pinning_loopback.h) drives every path of place_buffers — staged through scratch, registered for the call,
// inside an explicit registration at an offset — through every AllReduce
// algorithm, with exact sums and exact registration counts. The same with
// the real tcp and shm transports, where registering is a validated no-op.
// (tests/verbs/verbs_registration_test.cc runs the pinning paths on
// soft-RoCE, where a stale registration really moves the wrong pages.)
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "exact_sum.h"
#include "harness.h"
#include "pinning_loopback.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

enum class Path { kStaged, kPerCall, kRegistered };

struct PlaceCase {
  Algorithm algo;
  int ranks;
  size_t count;  // int64 elements
  Path path;
};

std::string case_name(const PlaceCase& k) {
  const char* path = k.path == Path::kStaged ? "staged" : k.path == Path::kPerCall ? "per_call" : "registered";
  return fmt::format("{}_{}ranks_{}_{}", algorithm_name(k.algo), k.ranks, k.count, path);
}
void PrintTo(const PlaceCase& k, std::ostream* os) { *os << case_name(k); }

int64_t value(int call, int rank, size_t i) {
  return static_cast<int64_t>(i * 31 + static_cast<size_t>(call) * 1000003 + static_cast<size_t>(rank) * 7919);
}

constexpr size_t kStageMax = 4096;  // bytes: a small threshold, so that both sides of it stay small
constexpr size_t kOffset = 3;       // elements: the call's buffer starts inside the registration

class BufferPlacement : public ::testing::TestWithParam<PlaceCase> {};

TEST_P(BufferPlacement, ExactSumsAndOnlyThePathsRegistrations) {
  ASSERT_TRUE(pinning_loopback_registered());
  const PlaceCase& k = GetParam();
  constexpr int kCalls = 3;
  run_ranks(
      k.ranks,
      [&](Communicator& comm) {
        std::vector<int64_t> mem(k.count + 2 * kOffset);
        int64_t* v = mem.data() + kOffset;
        BufferRegistration reg;
        if (k.path == Path::kRegistered) {
          auto r = comm.register_buffer(mem.data(), mem.size() * sizeof(int64_t));
          ASSERT_TRUE(r) << r.status().to_string();
          reg = std::move(*r);
          ASSERT_TRUE(reg.registered());
        }
        // Every rank's registrations are counted together: the calls are
        // collective, so wait until all ranks are past their setup.
        ASSERT_TRUE(comm.barrier());
        for (int call = 0; call < kCalls; ++call) {
          for (size_t i = 0; i < k.count; ++i) v[i] = value(call, comm.rank(), i);
          mem[0] = mem[k.count + kOffset] = -7;  // outside the call's buffer: must stay
          ASSERT_TRUE(comm.barrier());
          const uint64_t before = pinning_loopback_registrations();
          ASSERT_TRUE(comm.barrier());
          CollectiveOptions o;
          o.algorithm = k.algo;
          Status s = comm.allreduce(v, v, k.count, DataType::kI64, ReduceOp::kSum, o);
          ASSERT_TRUE(s) << s.to_string();
          ASSERT_TRUE(comm.barrier());
          const uint64_t made = pinning_loopback_registrations() - before;
          const SumCheck c = check_sum(v, k.count, k.ranks, [&](int r, size_t i) { return value(call, r, i); });
          EXPECT_EQ(c.wrong, 0u) << "call " << call << ": first wrong element " << c.first;
          EXPECT_EQ(mem[0], -7);
          EXPECT_EQ(mem[k.count + kOffset], -7);
          // Registrations of the barriers' one-byte tokens: none, they are staged.
          const uint64_t want = k.path == Path::kPerCall ? static_cast<uint64_t>(k.ranks) : 0;
          EXPECT_EQ(made, want) << "call " << call;
        }
        if (k.path == Path::kRegistered) {
          ASSERT_TRUE(comm.deregister(reg));
          EXPECT_FALSE(reg.registered());
        }
      },
      [&](CommConfig& c) {
        c.transport = "pinning-loopback";
        c.timeout = 30s;
        c.stage_max_bytes = kStageMax;
        c.scratch_reserve_bytes = 1 << 20;  // no scratch growth inside the counted calls
      });
}

std::vector<PlaceCase> placement_cases() {
  std::vector<PlaceCase> out;
  for (Algorithm a : {Algorithm::kHalvingDoubling, Algorithm::kRing, Algorithm::kButterfly, Algorithm::kOneShot}) {
    for (int ranks : {2, 3, 5}) {
      out.push_back({a, ranks, 509, Path::kStaged});  // 4072 bytes <= kStageMax
      out.push_back({a, ranks, 10007, Path::kPerCall});
      out.push_back({a, ranks, 10007, Path::kRegistered});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(PinningLoopback, BufferPlacement, ::testing::ValuesIn(placement_cases()),
                         [](const ::testing::TestParamInfo<PlaceCase>& p) { return case_name(p.param); });

// A registration over tcp or shm pins nothing, but is checked the same way.
class RegisterBuffer : public ::testing::TestWithParam<std::string> {};

TEST_P(RegisterBuffer, RejectsBadRangesNamingThemAndServesCallsInside) {
  run_ranks(
      2,
      [&](Communicator& comm) {
        std::vector<int32_t> a(1000, comm.rank() + 1), b(64);
        auto null = comm.register_buffer(nullptr, 16);
        ASSERT_FALSE(null);
        EXPECT_EQ(null.status().code(), StatusCode::kInvalidArgument);
        EXPECT_NE(null.status().message().find("data is null"), std::string::npos) << null.status().message();
        auto empty = comm.register_buffer(a.data(), 0);
        ASSERT_FALSE(empty);
        EXPECT_NE(empty.status().message().find("bytes is 0"), std::string::npos) << empty.status().message();
        auto wraps = comm.register_buffer(reinterpret_cast<void*>(UINTPTR_MAX - 10), 100);
        ASSERT_FALSE(wraps);
        EXPECT_NE(wraps.status().message().find("wrap"), std::string::npos) << wraps.status().message();

        auto ra = comm.register_buffer(a.data(), a.size() * sizeof(int32_t));
        ASSERT_TRUE(ra) << ra.status().to_string();
        auto overlap = comm.register_buffer(a.data() + 999, 8);
        ASSERT_FALSE(overlap);
        EXPECT_NE(overlap.status().message().find("overlaps"), std::string::npos) << overlap.status().message();
        auto rb = comm.register_buffer(b.data(), b.size() * sizeof(int32_t));
        ASSERT_TRUE(rb) << rb.status().to_string();

        ASSERT_TRUE(comm.allreduce(a.data() + 10, a.data() + 10, 500, DataType::kI32, ReduceOp::kSum));
        EXPECT_EQ(a[10], 3);
        EXPECT_EQ(a[509], 3);
        EXPECT_EQ(a[510], comm.rank() + 1);

        BufferRegistration moved = std::move(*ra);
        EXPECT_FALSE(ra->registered());
        Status twice = comm.deregister(*ra);
        ASSERT_FALSE(twice);
        EXPECT_NE(twice.message().find("empty"), std::string::npos) << twice.message();
        ASSERT_TRUE(comm.deregister(moved));
        Status again = comm.deregister(moved);
        ASSERT_FALSE(again);
        EXPECT_EQ(again.code(), StatusCode::kInvalidArgument);
        // rb deregisters itself when it goes out of scope.
      },
      [&](CommConfig& c) {
        c.transport = GetParam();
        c.timeout = 30s;
      });
}

INSTANTIATE_TEST_SUITE_P(Transports, RegisterBuffer, ::testing::Values("tcp", "shm", "loopback"));

TEST(RegisterBuffer, ARegistrationOfAnotherCommunicatorIsRefusedAndOutlivingItsCommunicatorIsHarmless) {
  MemoryStore s1, s2;
  CommConfig c;
  c.transport = "loopback";
  auto one = Communicator::create(c, s1);
  auto two = Communicator::create(c, s2);
  ASSERT_TRUE(one && two);
  std::vector<char> buf(100);
  auto r = (*one)->register_buffer(buf.data(), buf.size());
  ASSERT_TRUE(r);
  Status foreign = (*two)->deregister(*r);
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.message().find("not one of this communicator's"), std::string::npos) << foreign.message();
  EXPECT_TRUE(r->registered());
  one->reset();
  EXPECT_FALSE(r->registered());
  // *r is destroyed after its communicator: nothing to do, nothing touched.
}

}  // namespace
}  // namespace weft::coll::testing
