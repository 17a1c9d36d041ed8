// The watcher against real agents on loopback: how it treats an agent whose
// monitor fails as soon as it is ordered.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "loopback.h"
#include "weft/agent/watcher.h"

namespace weft::agent::testing {
namespace {

// An agent that accepts the monitor order and then cannot open its probe
// socket (a port taken, an address gone) ends each session at once. The
// watcher reports the failure once and retries with its back-off (it
// reconnected in a tight loop: thousands of sessions a second, each one an
// error line in the agent's log), while the other agents go on reporting.
struct Window {
  int silence_ms;
  int watch_ms;
  uint64_t max_orders;  // the first + the back-off's attempts within watch_ms, with slack
};

class FailingMonitorTest : public ::testing::TestWithParam<Window> {};

TEST_P(FailingMonitorTest, IsRetriedWithBackOffNotInATightLoop) {
  const Window w = GetParam();
  const uint16_t udp = free_udp_port();
  auto orders = std::make_shared<std::atomic<uint64_t>>(0);  // monitors a started
  auto a = LoopbackAgent::start(own_ip(1), udp, [orders](AgentConfig& c) {
    c.make_sender = [orders](std::string_view, const probe::SenderConfig&) -> Result<std::unique_ptr<probe::SenderBackend>> {
      ++*orders;
      return unavailable("bind: address already in use");
    };
  });
  auto b = LoopbackAgent::start(own_ip(2), udp);
  ASSERT_TRUE(a && b);
  const std::vector<HostEntry> hosts = {{"a", own_ip(1), a->port()}, {"b", own_ip(2), b->port()}};
  const std::vector<std::vector<probe::MonitorTuple>> tuples = {{{own_ip_u32(2), 50000}}, {{own_ip_u32(1), 50001}}};
  WatchConfig cfg;
  cfg.dport = udp;
  cfg.report_ms = 50;
  cfg.silence_ms = w.silence_ms;
  std::mutex mu;
  std::vector<int> reports(2), failures(2);
  std::string why;
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(w.watch_ms));
    stop = true;
  });
  const Status st = run_watch(
      hosts, tuples, test_secret(), cfg,
      [&](size_t h, uint64_t, std::vector<probe::TupleTally>, std::vector<Arrival>) {
        std::lock_guard lock(mu);
        ++reports[h];
      },
      [&](size_t h, const Status& s) {
        std::lock_guard lock(mu);
        ++failures[h];
        if (h == 0) why = s.message();
      },
      [](size_t) {}, stop);
  stopper.join();
  ASSERT_TRUE(st) << st.to_string();
  EXPECT_EQ(failures[0], 1);
  EXPECT_NE(why.find("address already in use"), std::string::npos) << why;
  EXPECT_EQ(reports[0], 0);
  EXPECT_EQ(failures[1], 0);
  EXPECT_GE(reports[1], w.watch_ms / cfg.report_ms / 2);
  EXPECT_GE(orders->load(), 3u);  // it does retry
  EXPECT_LE(orders->load(), w.max_orders);
}

// Back-off 0, 50, 100, 200, 400 ms, ... up to silence_ms: within 2 s, 9
// orders at a silence of 400 ms and 7 at 1000 ms (handshakes take a little
// time too).
INSTANTIATE_TEST_SUITE_P(Silences, FailingMonitorTest,
                         ::testing::Values(Window{400, 2000, 12}, Window{1000, 2000, 9}),
                         [](const auto& p) { return "Silence" + std::to_string(p.param.silence_ms); });

}  // namespace
}  // namespace weft::agent::testing
