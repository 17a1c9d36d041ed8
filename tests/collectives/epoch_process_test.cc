// Plan epochs with ranks as processes (docs/collectives-routes.md "Plan
// epochs"): a rank that dies while the ranks switch makes every survivor
// fail, naming it, within the call timeout — no survivor hangs.
#include <signal.h>

#include <chrono>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "epoch_files.h"
#include "processes.h"
#include "weft/collectives/communicator.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

// Exit codes of a survivor.
constexpr int kNamedTheDead = 10, kNamedAnother = 11, kNeverFailed = 12, kSetupFailed = 13;

// kKilledWhileAgreeing: rank 2 never sees the new epoch in its file, so it
//   waits for it inside the agreement while the others hold it; the test
//   kills it then.
// kExitsOnSwitching: rank 2 sees it and exits the moment it has switched,
//   its peers still switching or in the next call.
enum class Death { kKilledWhileAgreeing, kExitsOnSwitching };

class EpochDeath : public ::testing::TestWithParam<Death> {};

TEST_P(EpochDeath, EverySurvivorFailsNamingTheDeadRankWithinItsTimeout) {
  const int n = 3;
  const Death death = GetParam();
  const std::vector<uint16_t> ports = free_ports(3 + 2 * 9);
  if (ports.size() < 3 + 2 * 9) GTEST_SKIP() << "not enough free TCP ports on 127.0.0.1";
  const std::vector<uint16_t> dports(ports.begin(), ports.begin() + 3);
  const routing::RoutePlan plan_a =
      tcp_plan(n, "allreduce-hd", dports, std::vector<uint16_t>(ports.begin() + 3, ports.begin() + 12));
  const routing::RoutePlan plan_b =
      tcp_plan(n, "allreduce-hd", dports, std::vector<uint16_t>(ports.begin() + 12, ports.end()));
  const auto timeout = 4s;
  Children kids;
  const auto file = [&](int r) { return fmt::format("{}/rank{}.json", kids.dir, r); };
  kids.start(n, [&](int rank) {
    auto store = open_store("file:" + kids.dir, rank, Clock::now() + 20s);
    if (!store) return kSetupFailed;
    CommConfig cfg;
    cfg.rank = rank;
    cfg.size = n;
    cfg.transport = "tcp";
    cfg.timeout = timeout;
    cfg.plan = plan_a;
    cfg.plan_epochs = file(rank);
    cfg.job = "death";
    cfg.plan_poll = 10ms;
    if (rank == 2 && death == Death::kExitsOnSwitching) {
      cfg.trace = [](int, const TraceEvent& e) {
        if (e.kind == TraceEvent::kEpoch) ::_exit(0);
      };
    }
    auto comm = Communicator::create(cfg, **store);
    if (!comm) {
      std::fprintf(stderr, "%s\n", comm.status().to_string().c_str());
      return kSetupFailed;
    }
    const auto start = Clock::now();
    for (int64_t i = 0; Clock::now() - start < 20s; ++i) {
      if (i == 3) kids.signal_ready();
      std::vector<int64_t> v(1000, rank + i);
      const auto t0 = Clock::now();
      Status s = (*comm)->allreduce(v.data(), v.data(), v.size(), DataType::kI64, ReduceOp::kSum);
      if (!s) {
        kids.send_result(rank, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        std::fprintf(stderr, "rank %d: %s\n", rank, s.to_string().c_str());
        return std::regex_search(s.message(), std::regex("rank 2([^0-9]|$)")) ? kNamedTheDead : kNamedAnother;
      }
      if (v[999] != n * (n - 1) / 2 + n * i) return kNamedAnother;
      std::this_thread::sleep_for(2ms);
    }
    return kNeverFailed;
  });
  ASSERT_TRUE(kids.wait_ready(n, Clock::now() + 30s)) << "the ranks did not start calling";
  const std::string text = epoch_json("death", 1, plan_b);
  for (int r = 0; r < n; ++r) {
    if (r == 2 && death == Death::kKilledWhileAgreeing) continue;
    ASSERT_TRUE(publish(file(r), text));
  }
  auto died = Clock::now();
  if (death == Death::kKilledWhileAgreeing) {
    // Rank 2 waits up to a second (a quarter of the timeout) for its file.
    std::this_thread::sleep_for(300ms);
    kids.kill_rank(2, SIGKILL);
    died = Clock::now();
  }
  const auto deadline = died + timeout + 3s;
  EXPECT_EQ(kids.wait(2, deadline), death == Death::kKilledWhileAgreeing ? 128 + SIGKILL : 0);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(kids.wait(r, deadline), kNamedTheDead) << "rank " << r;
    EXPECT_LT(Clock::now() - died, timeout + 1s) << "rank " << r << " failed later than its timeout";
  }
}

INSTANTIATE_TEST_SUITE_P(PlanEpochs, EpochDeath,
                         ::testing::Values(Death::kKilledWhileAgreeing, Death::kExitsOnSwitching),
                         [](const auto& p) {
                           return p.param == Death::kKilledWhileAgreeing ? std::string("KilledWhileAgreeing")
                                                                         : std::string("ExitsOnSwitching");
                         });

}  // namespace
}  // namespace weft::coll::testing
