// The campaign runner against a scripted backend: every 5-tuple settled once,
// retries recover dropped probes, unstable 5-tuples are flagged, resume skips,
// and targeted campaigns stop per pair once every spine has a port.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "weft/probe/campaign.h"

namespace weft::probe {
namespace {

// A fabric in a box: destination d, source port p take spine (d*7 + p*13) % S + 1;
// destinations below 10 share the sender's leaf (spine 0). Drops the first send
// of every `drop_every`-th probe; `flap_port` answers alternately on two spines.
class ScriptedBackend final : public SenderBackend {
 public:
  ScriptedBackend(int spines, int drop_every, int flap_port = -1)
      : spines_(spines), drop_every_(drop_every), flap_port_(flap_port) {}
  std::string_view name() const override { return "scripted"; }
  Status open_ports(uint16_t first, uint16_t count) override {
    ++windows_;
    first_ = first;
    count_ = count;
    return ok_status();
  }
  Status send(std::span<const ProbeSend> probes) override {
    for (const auto& p : probes) {
      EXPECT_GE(p.sport, first_);
      EXPECT_LT(p.sport, first_ + count_);
      ++stats_.sent;
      ++sent_to_[p.dst_ip];
      const bool drop = drop_every_ > 0 && (sends_++ % drop_every_) == 0 && !dropped_.count({p.dst_ip, p.sport});
      if (drop) {
        dropped_.insert({p.dst_ip, p.sport});
        continue;
      }
      ProbeAnswer a;
      a.sequence = p.sequence;
      a.dst_ip = p.dst_ip;
      a.sport = p.sport;
      a.spine = spine_of(p.dst_ip, p.sport);
      if (p.sport == flap_port_) a.spine = (flaps_++ % 2) ? 1 : 2;
      a.dscp_seen = 8 + a.spine;
      a.rtt_ns = 1000;
      queue_.push_back(a);
    }
    return ok_status();
  }
  Status poll(int, std::vector<ProbeAnswer>& out) override {
    out.insert(out.end(), queue_.begin(), queue_.end());
    queue_.clear();
    return ok_status();
  }
  int spine_of(uint32_t dst, uint16_t sport) const {
    return dst < 10 ? 0 : static_cast<int>((dst * 7 + sport * 13u) % static_cast<uint32_t>(spines_)) + 1;
  }
  std::map<uint32_t, int> sent_to_;
  int windows_ = 0;

 private:
  int spines_, drop_every_, flap_port_;
  int flaps_ = 0;
  uint64_t sends_ = 0;
  uint16_t first_ = 0, count_ = 0;
  std::set<std::pair<uint32_t, uint16_t>> dropped_;
  std::vector<ProbeAnswer> queue_;
};

struct SweepCase {
  int spines, targets, ports, window, drop_every;
};

class SweepTest : public ::testing::TestWithParam<SweepCase> {};

TEST_P(SweepTest, EveryFiveTupleIsSettledOnceWithItsSpine) {
  const SweepCase c = GetParam();
  ScriptedBackend be(c.spines, c.drop_every);
  CampaignPlan plan;
  for (int t = 0; t < c.targets; ++t) plan.targets.push_back(static_cast<uint32_t>(5 + t * 3));
  plan.sport_first = 40000;
  plan.sport_count = static_cast<uint16_t>(c.ports);
  plan.port_window = static_cast<uint16_t>(c.window);
  plan.rate_pps = 0;
  plan.timeout_ms = 5;
  std::map<std::pair<uint32_t, uint16_t>, FlowResult> got;
  auto out = run_campaign(be, plan, [&](const FlowResult& f) {
    EXPECT_TRUE(got.emplace(std::make_pair(f.dst_ip, f.sport), f).second) << "flow reported twice";
  });
  ASSERT_TRUE(out) << out.status().to_string();
  ASSERT_EQ(got.size(), static_cast<size_t>(c.targets * c.ports));
  for (const auto& [k, f] : got) {
    EXPECT_EQ(f.spine, be.spine_of(k.first, k.second));
    EXPECT_EQ(f.answered, 1);
    EXPECT_FALSE(f.unstable);
  }
  const uint64_t dropped = c.drop_every ? (out->stats.retried) : 0;
  EXPECT_EQ(out->stats.sent, static_cast<uint64_t>(c.targets * c.ports) + dropped);
  EXPECT_EQ(out->stats.answered, static_cast<uint64_t>(c.targets * c.ports));
  EXPECT_EQ(out->stats.timed_out, 0u);
  EXPECT_EQ(be.windows_, (c.ports + c.window - 1) / c.window);
  if (c.drop_every) {
    EXPECT_GT(out->stats.retried, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SweepTest,
                         ::testing::Values(SweepCase{4, 3, 7, 256, 0}, SweepCase{8, 5, 64, 13, 0},
                                           SweepCase{3, 7, 13, 5, 3}, SweepCase{5, 1, 1, 1, 2}));

TEST(CampaignTest, AFiveTupleAnsweringOnTwoSpinesIsUnstable) {
  ScriptedBackend be(4, 0, 40002);
  CampaignPlan plan;
  plan.targets = {20};
  plan.sport_first = 40000;
  plan.sport_count = 5;
  plan.probes_per_port = 3;
  plan.rate_pps = 0;
  plan.timeout_ms = 5;
  std::map<uint16_t, FlowResult> got;
  ASSERT_TRUE(run_campaign(be, plan, [&](const FlowResult& f) { got[f.sport] = f; }));
  ASSERT_EQ(got.size(), 5u);
  EXPECT_TRUE(got[40002].unstable);
  EXPECT_EQ(got[40002].sent, 3);
  EXPECT_EQ(got[40002].answered, 3);
  EXPECT_EQ(std::set<int>({got[40002].spine, got[40002].other_spine}), (std::set<int>{1, 2}));
  for (uint16_t p : {40000, 40001, 40003, 40004}) EXPECT_FALSE(got[p].unstable) << p;
}

TEST(CampaignTest, ResumeSkipsRecordedFiveTuples) {
  ScriptedBackend be(4, 0);
  CampaignPlan plan;
  plan.targets = {20, 30};
  plan.sport_first = 100;
  plan.sport_count = 7;
  plan.rate_pps = 0;
  plan.skip.add(20, 100, 101);
  plan.skip.add(30, 106);
  int flows = 0;
  ASSERT_TRUE(run_campaign(be, plan, [&](const FlowResult& f) {
    ++flows;
    EXPECT_FALSE(plan.skip.contains(f.dst_ip, f.sport));
  }));
  EXPECT_EQ(flows, 11);
}

// Sequences are serial numbers (RFC 1982): a campaign whose sequences pass
// 2^32 - 1 mid-round must take the answers of 0, 1, ... as its own.
TEST(CampaignTest, SequencesThatWrapPastUint32MaxMidRoundAreAnswers) {
  ScriptedBackend be(4, 0);
  CampaignPlan plan;
  plan.targets = {20};
  plan.sport_count = 3;
  plan.probes_per_port = 2;
  plan.rate_pps = 0;
  plan.timeout_ms = 5;
  plan.first_sequence = 0xfffffffe;  // round 0: 0xfffffffe, 0xffffffff, 0; round 1: 1, 2, 3
  std::map<uint16_t, FlowResult> got;
  auto out = run_campaign(be, plan, [&](const FlowResult& f) { got[f.sport] = f; });
  ASSERT_TRUE(out) << out.status().message();
  ASSERT_EQ(got.size(), 3u);
  for (const auto& [sport, f] : got) {
    EXPECT_EQ(f.sent, 2) << sport;
    EXPECT_EQ(f.answered, 2) << sport;
    EXPECT_EQ(f.spine, be.spine_of(20, sport)) << sport;
  }
  EXPECT_EQ(out->stats.answered, 6u);
  EXPECT_EQ(out->stats.timed_out, 0u);
  EXPECT_EQ(out->stats.rejected_for(Reject::kLate), 0u);
  EXPECT_EQ(out->stats.retried, 0u);
}

// Answers every probe, but those of round 0 only after round 1 was sent,
// with the long round trip a late answer has: they arrive first.
class WrapLateRoundBackend final : public SenderBackend {
 public:
  std::string_view name() const override { return "late-round"; }
  Status open_ports(uint16_t, uint16_t) override { return ok_status(); }
  Status send(std::span<const ProbeSend> probes) override {
    std::vector<ProbeAnswer> now;
    for (const auto& p : probes) {
      ++stats_.sent;
      ProbeAnswer a;
      a.sequence = p.sequence;
      a.dst_ip = p.dst_ip;
      a.sport = p.sport;
      a.spine = 1;
      a.dscp_seen = 9;
      a.rtt_ns = sends_ == 0 ? 900000 : 1000;
      now.push_back(a);
    }
    if (sends_++ == 0) {
      held_ = std::move(now);
    } else {
      queue_.insert(queue_.end(), held_.begin(), held_.end());
      held_.clear();
      queue_.insert(queue_.end(), now.begin(), now.end());
    }
    return ok_status();
  }
  Status poll(int, std::vector<ProbeAnswer>& out) override {
    out.insert(out.end(), queue_.begin(), queue_.end());
    queue_.clear();
    return ok_status();
  }

 private:
  int sends_ = 0;
  std::vector<ProbeAnswer> held_, queue_;
};

// Round 0 (0xfffffffd..0xffffffff) times out; its answers arrive in round 1
// (0, 1, 2), after the wrap, and are late: round 1's own answers count.
TEST(CampaignTest, AnEarlierRoundsAnswerAfterTheSequenceWrapIsLate) {
  WrapLateRoundBackend be;
  CampaignPlan plan;
  plan.targets = {20};
  plan.sport_count = 3;
  plan.probes_per_port = 2;
  plan.retries = 0;
  plan.rate_pps = 0;
  plan.timeout_ms = 5;
  plan.first_sequence = 0xfffffffd;
  std::vector<FlowResult> got;
  auto out = run_campaign(be, plan, [&](const FlowResult& f) { got.push_back(f); });
  ASSERT_TRUE(out) << out.status().message();
  ASSERT_EQ(got.size(), 3u);
  for (const auto& f : got) {
    EXPECT_EQ(f.sent, 2) << f.sport;
    EXPECT_EQ(f.answered, 1) << f.sport;
    EXPECT_EQ(f.min_rtt_ns, 1000u) << f.sport;
  }
  EXPECT_EQ(out->stats.timed_out, 3u);
  EXPECT_EQ(out->stats.rejected_for(Reject::kLate), 3u);
  EXPECT_EQ(out->stats.rejected_for(Reject::kUnexpected), 0u);
}

// Sends into the void; poll() returns at once, or (waits) after its timeout.
class Silent final : public SenderBackend {
 public:
  explicit Silent(bool waits = false) : waits_(waits) {}
  std::string_view name() const override { return "silent"; }
  Status open_ports(uint16_t, uint16_t) override { return ok_status(); }
  Status send(std::span<const ProbeSend> p) override {
    stats_.sent += p.size();
    return ok_status();
  }
  Status poll(int ms, std::vector<ProbeAnswer>&) override {
    if (waits_) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return ok_status();
  }

 private:
  bool waits_;
};

TEST(CampaignTest, UnansweredProbesTimeOutAfterRetries) {
  Silent be;
  CampaignPlan plan;
  plan.targets = {20};
  plan.sport_count = 3;
  plan.retries = 2;
  plan.timeout_ms = 2;
  plan.rate_pps = 0;
  std::vector<FlowResult> got;
  auto out = run_campaign(be, plan, [&](const FlowResult& f) { got.push_back(f); });
  ASSERT_TRUE(out);
  ASSERT_EQ(got.size(), 3u);
  for (const auto& f : got) {
    EXPECT_EQ(f.sent, 3);
    EXPECT_EQ(f.answered, 0);
    EXPECT_EQ(f.spine, -1);
  }
  EXPECT_EQ(out->stats.timed_out, 3u);
  EXPECT_EQ(out->stats.retried, 6u);
}

// A cancel is seen within a pacing slice or a poll, wherever the campaign
// waits: on a rate of one probe per 10 s, or on a 60 s answer timeout.
struct CancelCase {
  const char* name;
  double rate_pps;
  int timeout_ms;
};

class CancelTest : public ::testing::TestWithParam<CancelCase> {};

TEST_P(CancelTest, ACancelEndsTheCampaignPromptlyAndReportsNoHalfProbedFlow) {
  Silent be(/*waits=*/true);
  CampaignPlan plan;
  plan.targets = {20, 31, 47};
  plan.sport_count = 300;
  plan.rate_pps = GetParam().rate_pps;
  plan.timeout_ms = GetParam().timeout_ms;
  std::atomic<bool> cancel{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  int flows = 0;
  auto out = run_campaign(be, plan, [&](const FlowResult&) { ++flows; }, &cancel);
  const auto took = std::chrono::steady_clock::now() - t0;
  stopper.join();
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_TRUE(out->cancelled);
  EXPECT_EQ(flows, 0) << "the first window was cut short";
  EXPECT_EQ(out->flows, 0u);
  EXPECT_EQ(out->stats.timed_out, 0u);
  EXPECT_LT(took, std::chrono::seconds(2));
}

INSTANTIATE_TEST_SUITE_P(Waits, CancelTest,
                         ::testing::Values(CancelCase{"SlowRate", 0.1, 10}, CancelCase{"LongTimeout", 0, 60000}),
                         [](const auto& p) { return std::string(p.param.name); });

class TargetedTest : public ::testing::TestWithParam<int> {};

TEST_P(TargetedTest, StopsPerPairOnceEverySpineHasAPort) {
  const int spines = GetParam();
  ScriptedBackend be(spines, 0);
  CampaignPlan plan;
  plan.targets = {20, 31, 47, 3};  // 3 is on the sender's leaf
  plan.sport_first = 50000;
  plan.sport_count = 1024;
  plan.stop_at_spines = spines;
  plan.rate_pps = 0;
  std::map<uint32_t, std::set<int>> spines_of;
  ASSERT_TRUE(run_campaign(be, plan, [&](const FlowResult& f) { spines_of[f.dst_ip].insert(f.spine); }).status().is_ok());
  auto out = run_campaign(be, plan, [](const FlowResult&) {});
  ASSERT_TRUE(out);
  for (const PairSpend& s : out->spend) {
    EXPECT_TRUE(s.complete) << s.dst_ip;
    if (s.dst_ip == 3) {
      EXPECT_EQ(s.probes, spines) << "a same-leaf pair stops after its first window";
      continue;
    }
    EXPECT_EQ(s.spines_found, spines);
    EXPECT_LT(s.probes, 1024) << "stopped early";
    EXPECT_EQ(s.probes % spines, 0) << "windows of S ports";
    EXPECT_EQ(spines_of[s.dst_ip].size(), static_cast<size_t>(spines));
  }
}
INSTANTIATE_TEST_SUITE_P(Spines, TargetedTest, ::testing::Values(2, 3, 5, 8));

// K ports per spine (a planner needs one per flow of the sending host):
// every pair stops with at least K answered ports on each spine, in windows
// of S·K ports, and a same-leaf pair after K answered ports; a lossy backend
// (every 3rd send dropped) only costs retries.
class TargetedPortsTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(TargetedPortsTest, StopsPerPairOnceEverySpineHasKAnsweredPorts) {
  const auto [spines, k, drop_every] = GetParam();
  ScriptedBackend be(spines, drop_every);
  CampaignPlan plan;
  plan.targets = {20, 31, 47, 3};  // 3 is on the sender's leaf
  plan.sport_first = 50000;
  plan.sport_count = 2048;
  plan.stop_at_spines = spines;
  plan.ports_per_spine = k;
  plan.port_window = 4096;
  plan.rate_pps = 0;
  plan.timeout_ms = 5;
  std::map<uint32_t, std::map<int, int>> ports_of;  // dst -> spine -> answered ports
  auto out = run_campaign(be, plan, [&](const FlowResult& f) {
    if (f.answered > 0) ++ports_of[f.dst_ip][f.spine];
  });
  ASSERT_TRUE(out) << out.status().to_string();
  for (const PairSpend& s : out->spend) {
    SCOPED_TRACE(s.dst_ip);
    EXPECT_TRUE(s.complete);
    if (s.dst_ip == 3) {
      EXPECT_EQ(ports_of[3][0], spines * k) << "a same-leaf pair: one window of S*K ports, all answered";
      continue;
    }
    EXPECT_EQ(s.spines_found, spines);
    EXPECT_EQ(s.full_spines, spines);
    EXPECT_LT(s.probes, 2048) << "stopped early";
    for (int sp = 1; sp <= spines; ++sp) EXPECT_GE(ports_of[s.dst_ip][sp], k) << "spine " << sp;
    // It stopped at the first window that completed it: one window less would not have.
    int windows = 0;
    for (const auto& [sp, n] : ports_of[s.dst_ip]) windows += n;
    EXPECT_EQ(windows % (spines * k), 0) << "whole windows of S*K ports";
  }
}
INSTANTIATE_TEST_SUITE_P(SpinesAndPorts, TargetedPortsTest,
                         ::testing::Values(std::tuple{2, 1, 0}, std::tuple{2, 4, 0}, std::tuple{3, 3, 3},
                                           std::tuple{4, 5, 0}, std::tuple{5, 2, 3}, std::tuple{8, 7, 0}));

TEST(CampaignTest, PortsPerSpineOutside1To4096IsRejected) {
  ScriptedBackend be(2, 0);
  CampaignPlan p;
  p.targets = {20};
  p.ports_per_spine = 0;
  EXPECT_EQ(run_campaign(be, p, [](const FlowResult&) {}).status().message(), "ports per spine must be in 1..4096 (got 0)");
  p.ports_per_spine = 4097;
  EXPECT_EQ(run_campaign(be, p, [](const FlowResult&) {}).status().message(),
            "ports per spine must be in 1..4096 (got 4097)");
}

TEST(CampaignTest, InvalidPlansAreRejectedWithAReason) {
  ScriptedBackend be(2, 0);
  CampaignPlan p;
  EXPECT_EQ(run_campaign(be, p, [](const FlowResult&) {}).status().message(), "campaign has no targets");
  p.targets = {1};
  p.sport_first = 65500;
  p.sport_count = 100;
  EXPECT_EQ(run_campaign(be, p, [](const FlowResult&) {}).status().message(), "bad source port range 65500+100");
}

}  // namespace
}  // namespace weft::probe
