// The table of connects in progress (nccl_net/weft/nccl_net/in_progress.h):
// a connect NCCL stops polling is freed when its context is finalized,
// when it has been idle too long, or when the table goes (unload), and a
// stale id never reaches another connect.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "weft/nccl_net/in_progress.h"

namespace weft::nccl_net::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

// Stands in for a parked connect: counts how many are alive.
struct Tracked {
  explicit Tracked(int* alive) : alive_(alive) { ++*alive_; }
  ~Tracked() { --*alive_; }
  Tracked(const Tracked&) = delete;
  Tracked& operator=(const Tracked&) = delete;
  int* alive_;
};

const Clock::time_point t0{};

TEST(ParkedConnect, IsResumedOnceByItsIdAndParkedAgainUnderIt) {
  int alive = 0;
  InProgress<Tracked> table;
  const std::uint64_t id = table.park(0, std::make_unique<Tracked>(&alive), nullptr, t0);
  EXPECT_EQ(id, 1u);
  auto item = table.resume(id);
  ASSERT_NE(item, nullptr);
  EXPECT_EQ(table.resume(id), nullptr);  // taken: a second poll with the same bytes finds nothing
  EXPECT_EQ(table.park(id, std::move(item), nullptr, t0), id);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(alive, 1);
}

TEST(ParkedConnect, IdsAreNeverReusedSoAStaleHandleNamesNothing) {
  int alive = 0;
  InProgress<Tracked> table;
  const std::uint64_t first = table.park(0, std::make_unique<Tracked>(&alive), nullptr, t0);
  EXPECT_EQ(table.drop_owner(nullptr), 1u);
  const std::uint64_t second = table.park(0, std::make_unique<Tracked>(&alive), nullptr, t0);
  EXPECT_NE(second, first);
  EXPECT_EQ(table.resume(first), nullptr);
  EXPECT_EQ(alive, 1);
  // A freed id was issued (connect names it as given up); bytes no park
  // wrote were not.
  EXPECT_TRUE(table.issued(first));
  EXPECT_TRUE(table.issued(second));
  EXPECT_FALSE(table.issued(0));
  EXPECT_FALSE(table.issued(second + 1));
}

class IdleConnect : public ::testing::TestWithParam<int> {};

// Freed once idle longer than the limit, and only then; one polled since
// stays.
TEST_P(IdleConnect, IsFreedOnlyOnceIdleLongerThanTheLimit) {
  const seconds idle(GetParam());
  int alive = 0;
  InProgress<Tracked> table;
  const std::uint64_t old_id = table.park(0, std::make_unique<Tracked>(&alive), nullptr, t0);
  table.park(0, std::make_unique<Tracked>(&alive), nullptr, t0 + seconds(1));
  EXPECT_EQ(table.reap_idle(t0 + idle, idle), 0u);
  EXPECT_EQ(alive, 2);
  EXPECT_EQ(table.reap_idle(t0 + idle + std::chrono::nanoseconds(1), idle), 1u);
  EXPECT_EQ(alive, 1);
  EXPECT_EQ(table.resume(old_id), nullptr);
  EXPECT_EQ(table.reap_idle(t0 + seconds(1) + idle + std::chrono::nanoseconds(1), idle), 1u);
  EXPECT_EQ(alive, 0);
}

INSTANTIATE_TEST_SUITE_P(Limit, IdleConnect, ::testing::Values(1, 60, 300),
                         [](const auto& p) { return std::to_string(p.param) + "s"; });

class FinalizedContext : public ::testing::TestWithParam<int> {};

// finalize(ctx) frees the connects started under ctx, none of another's.
TEST_P(FinalizedContext, FreesTheConnectsItStartedAndNoOthers) {
  const int mine = GetParam();
  int a = 0, b = 0;
  InProgress<Tracked> table;
  int ctx_a = 0, ctx_b = 0;
  for (int i = 0; i < mine; ++i) table.park(0, std::make_unique<Tracked>(&a), &ctx_a, t0);
  const std::uint64_t other = table.park(0, std::make_unique<Tracked>(&b), &ctx_b, t0);
  EXPECT_EQ(table.drop_owner(&ctx_a), static_cast<std::size_t>(mine));
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  EXPECT_NE(table.resume(other), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Connects, FinalizedContext, ::testing::Values(1, 3, 64),
                         [](const auto& p) { return std::to_string(p.param) + "_parked"; });

TEST(ParkedConnect, IsFreedWhenTheTableGoesAsAtUnload) {
  int alive = 0;
  {
    InProgress<Tracked> table;
    for (int i = 0; i < 5; ++i) table.park(0, std::make_unique<Tracked>(&alive), nullptr, t0);
    EXPECT_EQ(alive, 5);
  }
  EXPECT_EQ(alive, 0);
}

}  // namespace
}  // namespace weft::nccl_net::testing
