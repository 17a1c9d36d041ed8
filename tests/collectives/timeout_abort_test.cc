// Deadlines, abort from another thread, and the launchers' environment
// (the TCP store: store_test.cc).
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "harness.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

class Deadlines : public ::testing::TestWithParam<std::string> {};

TEST_P(Deadlines, AnAbsentPeerIsATimeoutNamingIt) {
  std::atomic<bool> done{false};
  run_ranks(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) {
          while (!done) std::this_thread::sleep_for(1ms);  // never joins
          return;
        }
        float x = 1;
        CollectiveOptions o;
        o.timeout = 300ms;
        const auto t0 = Clock::now();
        Status s = comm.allreduce(&x, &x, 1, DataType::kF32, ReduceOp::kSum, o);
        done = true;
        EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.to_string();
        EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.message();
        EXPECT_LT(Clock::now() - t0, 2s);
        // A failed communicator stays failed: the next call says why at once.
        EXPECT_EQ(comm.allreduce(&x, &x, 1, DataType::kF32, ReduceOp::kSum).code(), StatusCode::kDeadlineExceeded);
      },
      [&](CommConfig& c) { c.transport = GetParam(); });
}

// "No timeout" as it is often written: a timeout too long for a deadline
// (steady_clock counts nanoseconds in 64 bits, about 292 years) counts as
// kLongestTimeout instead of wrapping into the past and failing at once.
TEST_P(Deadlines, ATimeoutTooLongForTheClockCountsAsTheLongestAndCallsSucceed) {
  const std::chrono::milliseconds years300 = std::chrono::hours(24) * 365 * 300;
  for (const auto timeout : {std::chrono::milliseconds::max(), years300, kLongestTimeout}) {
    run_ranks(
        3,
        [&](Communicator& comm) {
          std::vector<float> v(1000, static_cast<float>(comm.rank() + 1));
          EXPECT_TRUE(comm.allreduce(v.data(), v.data(), v.size(), DataType::kF32, ReduceOp::kSum).is_ok());
          CollectiveOptions o;
          o.timeout = timeout;
          Status s = comm.allreduce(v.data(), v.data(), v.size(), DataType::kF32, ReduceOp::kSum, o);
          EXPECT_TRUE(s.is_ok()) << s.to_string();
          EXPECT_EQ(v[999], 18.0f);  // (1 + 2 + 3) * 3
        },
        [&](CommConfig& c) {
          c.transport = GetParam();
          c.timeout = timeout;
        });
  }
}

TEST_P(Deadlines, AbortFromAnotherThreadEndsAWaitingCall) {
  std::atomic<bool> done{false};
  run_ranks(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) {
          while (!done) std::this_thread::sleep_for(1ms);
          return;
        }
        std::thread killer([&] {
          std::this_thread::sleep_for(200ms);
          comm.abort("operator pressed stop");
        });
        std::vector<float> v(1 << 16, 1.0f);
        const auto t0 = Clock::now();
        Status s = comm.allreduce(v.data(), v.data(), v.size(), DataType::kF32, ReduceOp::kSum);
        done = true;
        killer.join();
        EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
        EXPECT_NE(s.message().find("operator pressed stop"), std::string::npos) << s.message();
        EXPECT_LT(Clock::now() - t0, 5s) << "the timeout is 120 s: abort, not the deadline, ended the call";
      },
      [&](CommConfig& c) { c.transport = GetParam(); });
}

INSTANTIATE_TEST_SUITE_P(Collectives, Deadlines, ::testing::Values("loopback", "tcp", "shm"));

TEST(Config, InvalidValuesAreRejectedWithAMessage) {
  MemoryStore store;
  CommConfig c;
  c.rank = 3;
  c.size = 3;
  auto r = Communicator::create(c, store);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), "communicator: rank 3 is outside [0, 3)");
  c.rank = 0;
  c.failed_links = {{0, 5}};
  EXPECT_NE(Communicator::create(c, store).status().message().find("failed link 0-5"), std::string::npos);
  c.failed_links.clear();
  c.transport = "carrier-pigeon";
  c.size = 1;
  EXPECT_NE(Communicator::create(c, store).status().message().find("unknown transport 'carrier-pigeon'"), std::string::npos);
  c.transport = "loopback";
  c.plan = routing::RoutePlan{};
  c.plan->ranks = 1;
  c.plan->collective = "nccl-ring";  // the NCCL plugin's: several QP flows per pair
  EXPECT_EQ(Communicator::create(c, store).status().message(),
            "communicator: the route plan is for 'nccl-ring'; the library runs plans of allreduce-hd, allreduce-ring or "
            "allreduce-hybrid");
}

// The in-call switch variables win over the config; a bad value names the
// variable, not the config field it sets.
TEST(Config, SwitchVariablesOutOfRangeNameTheVariable) {
  MemoryStore store;
  CommConfig c;
  c.transport = "loopback";
  for (const char* bad : {"5", "60001", "0", "x"}) {
    ::setenv("WEFT_SWITCH_STALL_MS", bad, 1);
    const std::string want = std::string(bad) == "0" || std::string(bad) == "x"
                                 ? fmt::format("WEFT_SWITCH_STALL_MS must be a number of ms (got '{}')", bad)
                                 : fmt::format("WEFT_SWITCH_STALL_MS must be in [10, 60000] ms (got '{}')", bad);
    EXPECT_EQ(Communicator::create(c, store).status().message(), want);
  }
  ::setenv("WEFT_SWITCH_STALL_MS", "10", 1);
  EXPECT_TRUE(Communicator::create(c, store).is_ok());
  ::unsetenv("WEFT_SWITCH_STALL_MS");
  ::setenv("WEFT_IN_CALL_SWITCH", "yes", 1);
  EXPECT_EQ(Communicator::create(c, store).status().message(), "WEFT_IN_CALL_SWITCH must be 0 or 1 (got 'yes')");
  ::unsetenv("WEFT_IN_CALL_SWITCH");
}

TEST(LaunchEnv, TorchrunVariablesGiveRankSizeAndStore) {
  ::setenv("RANK", "3", 1);
  ::setenv("WORLD_SIZE", "5", 1);
  ::setenv("MASTER_ADDR", "10.0.0.1", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  auto info = launch_info_from_env();
  ASSERT_TRUE(info) << info.status().to_string();
  EXPECT_EQ(info->rank, 3);
  EXPECT_EQ(info->size, 5);
  EXPECT_EQ(info->launcher, "torchrun");
  EXPECT_EQ(info->store, "tcp://10.0.0.1:29500");
  // Under torchrun's agent store MASTER_PORT is taken: WEFT_STORE is asked for.
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  EXPECT_EQ(launch_info_from_env().status().message(),
            "environment: torchrun's agent serves its own store on MASTER_PORT=29500 "
            "(TORCHELASTIC_USE_AGENT_STORE=True); give weft one of its own: WEFT_STORE=tcp://10.0.0.1:PORT with a "
            "free PORT, the same on every rank (or use weft through torch.distributed)");
  ::setenv("WEFT_STORE", "tcp://10.0.0.1:29600", 1);
  info = launch_info_from_env();
  ASSERT_TRUE(info) << info.status().to_string();
  EXPECT_EQ(info->store, "tcp://10.0.0.1:29600");
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
  ::unsetenv("WEFT_STORE");
  info = launch_info_from_env();
  ASSERT_TRUE(info) << info.status().to_string();
  EXPECT_EQ(info->store, "tcp://10.0.0.1:29500");
  ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  ::setenv("RANK", "5", 1);
  EXPECT_NE(launch_info_from_env().status().message().find("RANK=5 is not below WORLD_SIZE=5"), std::string::npos);
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(v);
  ::setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  ::setenv("WEFT_STORE", "file:/tmp/x", 1);
  info = launch_info_from_env();
  ASSERT_TRUE(info);
  EXPECT_EQ(info->launcher, "openmpi");
  EXPECT_EQ(info->store, "file:/tmp/x");
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "WEFT_STORE"}) ::unsetenv(v);
}

}  // namespace
}  // namespace weft::coll::testing
