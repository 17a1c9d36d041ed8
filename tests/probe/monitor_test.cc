// The monitoring loop (probe/weft/probe/monitor.h) over a scripted backend: a
// tuple whose probes stop being answered builds a streak of exactly the
// probes sent since, an answered one resets it, rounds keep the rate, and
// bad plans are refused by name.
#include "weft/probe/monitor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace weft::probe {
namespace {

// Answers every probe at once, except to destinations in `dead`.
class Answering final : public SenderBackend {
 public:
  std::string_view name() const override { return "answering"; }
  Status open_ports(uint16_t first, uint16_t count) override {
    first_ = first;
    count_ = count;
    return ok_status();
  }
  Status send(std::span<const ProbeSend> probes) override {
    for (const auto& p : probes) {
      EXPECT_GE(p.sport, first_);
      EXPECT_LT(p.sport, first_ + count_);
      ++stats_.sent;
      ++sent_to[p.dst_ip];
      if (dead.contains(p.dst_ip)) continue;
      queue_.push_back({.sequence = p.sequence, .dst_ip = p.dst_ip, .sport = p.sport, .dscp_seen = 11, .spine = 3,
                        .hop_ip = 0, .rtt_ns = 5000});
    }
    return ok_status();
  }
  Status poll(int timeout_ms, std::vector<ProbeAnswer>& out) override {
    if (queue_.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
      return ok_status();
    }
    out.insert(out.end(), queue_.begin(), queue_.end());
    queue_.clear();
    return ok_status();
  }
  std::set<uint32_t> dead;
  std::map<uint32_t, uint64_t> sent_to;

 private:
  uint16_t first_ = 0, count_ = 0;
  std::vector<ProbeAnswer> queue_;
};

TEST(Monitor, ADeadDestinationBuildsAStreakAndALiveOneNone) {
  Answering be;
  be.dead = {0x0a000202};
  MonitorPlan plan;
  plan.tuples = {{0x0a000201, 49153}, {0x0a000202, 49160}, {0x0a000203, 49157}};
  plan.rate_pps = 600;  // a round every 5 ms
  plan.timeout_ms = 20;
  plan.report_ms = 50;
  std::atomic<bool> cancel{false};
  std::vector<TupleTally> last;
  int reports = 0;
  const Status st = run_monitor(be, plan, [&](uint64_t, std::span<const TupleTally> t) {
    last.assign(t.begin(), t.end());
    if (++reports == 6) cancel.store(true);
  }, cancel);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_EQ(last.size(), 3u);
  for (size_t i : {0u, 2u}) {
    EXPECT_EQ(last[i].lost, 0u);
    EXPECT_EQ(last[i].streak, 0u);
    EXPECT_EQ(last[i].answered, last[i].sent);
    EXPECT_EQ(last[i].spine, 3);
    EXPECT_EQ(last[i].rtt_ns, 5000u);
  }
  EXPECT_EQ(last[1].answered, 0u);
  EXPECT_EQ(last[1].spine, -1);
  EXPECT_GT(last[1].lost, 0u);
  EXPECT_EQ(last[1].streak, last[1].lost);  // every loss in a row
  // Probes younger than the timeout are neither answered nor lost yet.
  EXPECT_LE(last[1].sent - last[1].lost, plan.timeout_ms / 5 + 2u);
  // One probe per tuple per round: each tuple was sent as often as the others.
  EXPECT_EQ(be.sent_to[0x0a000201], be.sent_to[0x0a000202]);
  EXPECT_EQ(be.sent_to[0x0a000203], be.sent_to[0x0a000202]);
}

TEST(Monitor, AnAnsweredProbeEndsTheStreak) {
  Answering be;
  be.dead = {0x0a000201};
  MonitorPlan plan;
  plan.tuples = {{0x0a000201, 50000}};
  plan.rate_pps = 200;
  plan.timeout_ms = 10;
  plan.report_ms = 40;
  std::atomic<bool> cancel{false};
  std::vector<TupleTally> seen;
  int reports = 0;
  const Status st = run_monitor(be, plan, [&](uint64_t, std::span<const TupleTally> t) {
    seen.push_back(t[0]);
    if (++reports == 4) be.dead.clear();  // the path comes back
    if (reports == 10) cancel.store(true);
  }, cancel);
  ASSERT_TRUE(st.is_ok());
  EXPECT_GT(seen[3].streak, 0u);
  EXPECT_EQ(seen.back().streak, 0u);
  EXPECT_EQ(seen.back().lost, seen[4].lost);  // no loss after the path came back (one report of slack)
  EXPECT_GT(seen.back().answered, 0u);
}

struct BadPlan {
  std::string name;
  MonitorPlan plan;
  std::string message;
};

class MonitorPlanRefused : public ::testing::TestWithParam<BadPlan> {};

TEST_P(MonitorPlanRefused, NamingTheValue) {
  const Status st = GetParam().plan.validate();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find(GetParam().message), std::string::npos) << st.message();
}

MonitorPlan with(std::vector<MonitorTuple> t, double rate = 100, int timeout = 100, int report = 100) {
  MonitorPlan p;
  p.tuples = std::move(t);
  p.rate_pps = rate;
  p.timeout_ms = timeout;
  p.report_ms = report;
  return p;
}

INSTANTIATE_TEST_SUITE_P(
    Plans, MonitorPlanRefused,
    ::testing::Values(BadPlan{"Twice", with({{7, 100}, {7, 100}}), "listed twice"},
                      BadPlan{"PortZero", with({{7, 0}}), "port 0"},
                      BadPlan{"WideSpan", with({{7, 1000}, {8, 5096}}), "source ports 1000..5096 span more than 4096"},
                      BadPlan{"RateZero", with({{7, 100}}, 0), "monitor rate 0 probes/s"},
                      BadPlan{"Timeout", with({{7, 100}}, 100, 10001), "monitor timeout 10001 ms"},
                      BadPlan{"Report", with({{7, 100}}, 100, 100, 9), "report interval 9 ms"}),
    [](const auto& p) { return p.param.name; });

TEST(MonitorPlan, NoTuplesIsAMonitorThatOnlyReports) { EXPECT_TRUE(with({}).validate().is_ok()); }

}  // namespace
}  // namespace weft::probe
