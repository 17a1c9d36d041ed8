// WatchState (tools/watch/watch_state.h): reports and arrivals turned into
// verdicts with exact links, on a 3-leaf, 2-spine fabric with one host per
// leaf: a forward loss, a reply loss told apart by what arrived, the wait for
// a confirmation, a restored link, a silent host, and what a watcher without
// arrivals can and cannot say.
#include "watch/watch_metrics.h"
#include "watch/watch_state.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace weft::cli {
namespace {

constexpr uint64_t kMs = 1000000;
const std::vector<uint32_t> kIps = {10, 20, 30};  // host i on leaf i+1

// 0 -> 1 over s1 and s2, 1 -> 0 over s1 and s2, 0 -> 2 and 2 -> 0 over s1.
std::vector<WatchTuple> tuples() {
  return {{0, 1, 100, 1, 1, 2, false}, {0, 1, 101, 2, 1, 2, false}, {1, 0, 102, 1, 2, 1, false},
          {1, 0, 103, 2, 2, 1, false}, {0, 2, 104, 1, 1, 3, true},   {2, 0, 105, 1, 3, 1, false}};
}

// Report times are unix-like: 0 would read as "never reported".
uint64_t at(uint64_t ms) { return (10000 + ms) * kMs; }

probe::TupleTally row(uint32_t dst, uint16_t sport, uint64_t sent, uint32_t streak, int spine) {
  probe::TupleTally t;
  t.dst_ip = dst;
  t.sport = sport;
  t.sent = sent;
  t.lost = streak;
  t.answered = sent - streak;
  t.streak = streak;
  t.spine = spine;
  return t;
}

class WatchStateTest : public ::testing::Test {
 protected:
  WatchState w{tuples(), kIps, 3, 2, {.streak = 3, .stale_ms = 300, .confirm_ms = 100, .report_ms = 100}};

  // Host 0's and host 1's reports: streaks of its tuples, in order.
  void report(uint64_t at_ms, uint64_t sent, std::vector<uint32_t> s0, std::vector<uint32_t> s1) {
    const std::vector<probe::TupleTally> h0 = {row(20, 100, sent, s0[0], 1), row(20, 101, sent, s0[1], 2),
                                               row(30, 104, sent, s0[2], 1)};
    const std::vector<probe::TupleTally> h1 = {row(10, 102, sent, s1[0], 1), row(10, 103, sent, s1[1], 2)};
    const std::vector<probe::TupleTally> h2 = {row(10, 105, sent, 0, 1)};
    w.update(0, h0, at(at_ms));
    w.update(1, h1, at(at_ms));
    w.update(2, h2, at(at_ms));
  }
  // What each host's reflector received: counts per source port.
  void arrived(uint64_t at_ms, uint64_t at1_100, uint64_t at1_101, uint64_t at0_102, uint64_t at0_103, uint64_t at2_104) {
    const std::vector<agent::Arrival> to1 = {{10, 100, at1_100}, {10, 101, at1_101}};
    const std::vector<agent::Arrival> to0 = {{20, 102, at0_102}, {20, 103, at0_103}, {30, 105, at2_104}};
    const std::vector<agent::Arrival> to2 = {{10, 104, at2_104}};
    w.arrived(1, to1, at(at_ms));
    w.arrived(0, to0, at(at_ms));
    w.arrived(2, to2, at(at_ms));
  }
};

// An event's monotonic times become wall-clock stamps from one reading of
// both clocks: their difference is kept exactly, whatever the realtime clock
// did meanwhile; none (0) stays none.
TEST(WatchWallClock, AnEventsTimesKeepTheirMonotonicDifference) {
  LinkEvent e;
  e.first_loss_ns = 5'000 * kMs;
  e.at_ns = 5'250 * kMs;
  const LinkEvent w = on_wall_clock(e, 5'400 * kMs, 1'700'000'000'000 * kMs);
  EXPECT_EQ(w.first_loss_ns, (1'700'000'000'000 - 400) * kMs);
  EXPECT_EQ(w.at_ns, (1'700'000'000'000 - 150) * kMs);
  EXPECT_EQ(w.at_ns - w.first_loss_ns, 250 * kMs);
  LinkEvent up;
  up.kind = LinkEvent::Kind::kUp;
  up.at_ns = 5'400 * kMs;
  const LinkEvent u = on_wall_clock(up, 5'400 * kMs, 1'700'000'000'000 * kMs);
  EXPECT_EQ(u.first_loss_ns, 0u);
  EXPECT_EQ(u.at_ns, 1'700'000'000'000 * kMs);
}

TEST_F(WatchStateTest, ALinkIsDownOnceConfirmedAndUpOnceHealed) {
  report(0, 5, {0, 0, 0}, {0, 0});
  arrived(0, 5, 5, 5, 5, 5);
  EXPECT_TRUE(w.evaluate(0).empty());
  // s1 -> l2 fails: 0 -> 1 over s1 loses its requests, 1 -> 0 over s1 its
  // replies (they come back over s1 -> l2); both round trips fail alike.
  report(1000, 8, {3, 0, 0}, {3, 0});
  arrived(1000, 5, 8, 8, 8, 8);
  EXPECT_TRUE(w.evaluate(at(1000)).empty());  // the destinations have not reported since the losses began
  EXPECT_EQ(w.counts(at(1000)).unknown, 2u);
  report(1150, 10, {5, 0, 0}, {5, 0});
  arrived(1150, 5, 10, 10, 10, 10);
  EXPECT_EQ(w.counts(at(1150)).failing, 2u);
  EXPECT_TRUE(w.evaluate(at(1150)).empty());  // localised, not yet confirmed
  auto down = w.evaluate(at(1260));
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].kind, LinkEvent::Kind::kDown);
  EXPECT_EQ(down[0].links, std::vector<std::string>{"s1->l2"});
  EXPECT_EQ(down[0].first_loss_ns, at(1000));
  EXPECT_EQ(down[0].at_ns, at(1260));
  EXPECT_EQ(w.counts(at(1260)).down, "s1->l2");
  EXPECT_TRUE(w.evaluate(at(1300)).empty());  // said once
  report(1400, 12, {0, 0, 0}, {0, 0});
  arrived(1400, 7, 12, 12, 12, 12);
  EXPECT_TRUE(w.evaluate(at(1400)).empty());
  auto up = w.evaluate(at(1510));
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].kind, LinkEvent::Kind::kUp);
  EXPECT_EQ(up[0].links, std::vector<std::string>{"s1->l2"});
  EXPECT_FALSE(w.counts(at(1510)).down);
}

// The routing withdraws s1 -> l2: 0 -> 1's port that took s1 now takes s2 and
// is healthy, as is everything else, yet no probe crosses s1 -> l2. The link
// is up only once a probe crosses it again and comes back.
TEST_F(WatchStateTest, AWithdrawnLinkIsNotUpUntilAProbeCrossesItAgain) {
  report(0, 5, {0, 0, 0}, {0, 0});
  arrived(0, 5, 5, 5, 5, 5);
  report(1000, 8, {3, 0, 0}, {3, 0});
  arrived(1000, 5, 8, 8, 8, 8);
  report(1150, 10, {5, 0, 0}, {5, 0});
  arrived(1150, 5, 10, 10, 10, 10);
  ASSERT_TRUE(w.evaluate(at(1150)).empty());
  ASSERT_EQ(w.evaluate(at(1260)).size(), 1u);
  ASSERT_EQ(w.counts(at(1260)).down, "s1->l2");
  auto rerouted = [&](uint64_t at_ms, uint64_t sent, int spine) {
    const std::vector<probe::TupleTally> h0 = {row(20, 100, sent, 0, spine), row(20, 101, sent, 0, 2),
                                               row(30, 104, sent, 0, 1)};
    const std::vector<probe::TupleTally> h1 = {row(10, 102, sent, 0, spine), row(10, 103, sent, 0, 2)};
    const std::vector<probe::TupleTally> h2 = {row(10, 105, sent, 0, 1)};
    w.update(0, h0, at(at_ms));
    w.update(1, h1, at(at_ms));
    w.update(2, h2, at(at_ms));
    arrived(at_ms, sent, sent, sent, sent, sent);
  };
  for (uint64_t t = 1400; t <= 2400; t += 100) {
    rerouted(t, 12 + t / 100, 2);
    EXPECT_TRUE(w.evaluate(at(t)).empty()) << "withdrawn, not restored, at " << t << " ms";
  }
  EXPECT_EQ(w.counts(at(2400)).down, "s1->l2");
  rerouted(2500, 40, 1);
  EXPECT_TRUE(w.evaluate(at(2500)).empty());  // crossed again, not yet confirmed
  auto up = w.evaluate(at(2610));
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].kind, LinkEvent::Kind::kUp);
  EXPECT_EQ(up[0].links, std::vector<std::string>{"s1->l2"});
}

TEST_F(WatchStateTest, RequestsThatStillArriveMakeTheOtherDirectionTheFailedOne) {
  report(0, 5, {0, 0, 0}, {0, 0});
  arrived(0, 5, 5, 5, 5, 5);
  // l2 -> s1 fails: 1 -> 0 over s1 loses its requests, 0 -> 1 over s1 its replies.
  report(1000, 8, {3, 0, 0}, {3, 0});
  arrived(1000, 8, 8, 5, 8, 8);
  report(1150, 10, {5, 0, 0}, {5, 0});
  arrived(1150, 10, 10, 5, 10, 10);
  w.evaluate(at(1150));
  auto down = w.evaluate(at(1260));
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].kind, LinkEvent::Kind::kDown);
  EXPECT_EQ(down[0].links, std::vector<std::string>{"l2->s1"});
}

// The cable s1 - l2 is cut, but host 0's arrivals (which tell that 1 -> 0's
// requests stop) come only later, as from a host whose reports crossed the
// cable until it was reconnected: s1->l2 is localised first, then the verdict
// grows into the cable, which is named when s1->l2 would have been.
TEST_F(WatchStateTest, AVerdictThatGrowsIntoItsCableKeepsTheTimeItHeld) {
  report(0, 5, {0, 0, 0}, {0, 0});
  arrived(0, 5, 5, 5, 5, 5);
  EXPECT_TRUE(w.evaluate(at(0)).empty());
  auto arrived_but_at_host0 = [&](uint64_t at_ms, uint64_t n) {
    w.arrived(1, std::vector<agent::Arrival>{{10, 100, 5}, {10, 101, n}}, at(at_ms));
    w.arrived(2, std::vector<agent::Arrival>{{10, 104, n}}, at(at_ms));
  };
  report(1000, 8, {3, 0, 0}, {3, 0});
  arrived_but_at_host0(1000, 8);
  EXPECT_TRUE(w.evaluate(at(1000)).empty());
  report(1150, 10, {5, 0, 0}, {5, 0});
  arrived_but_at_host0(1150, 10);
  EXPECT_TRUE(w.evaluate(at(1150)).empty());  // s1->l2 localised, not yet confirmed
  EXPECT_EQ(w.counts(at(1150)).failing, 1u);
  report(1200, 11, {6, 0, 0}, {6, 0});
  arrived_but_at_host0(1200, 11);
  w.arrived(0, std::vector<agent::Arrival>{{20, 102, 5}, {20, 103, 11}, {30, 105, 11}}, at(1200));
  EXPECT_EQ(w.counts(at(1200)).failing, 2u);
  EXPECT_TRUE(w.evaluate(at(1200)).empty());  // the cable, held since 1150
  auto down = w.evaluate(at(1250));
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].kind, LinkEvent::Kind::kDown);
  // The direction that held the whole wait first: the record names it.
  EXPECT_EQ(down[0].links, (std::vector<std::string>{"s1->l2", "l2->s1"}));
  EXPECT_EQ(w.counts(at(1250)).down, "s1->l2");
  EXPECT_EQ(down[0].first_loss_ns, at(1000));
  EXPECT_EQ(down[0].at_ns, at(1250));
  EXPECT_TRUE(w.evaluate(at(1400)).empty());  // said once
}

TEST_F(WatchStateTest, WithoutArrivalsTheTwoDirectionsAreAmbiguous) {
  report(0, 5, {0, 0, 0}, {0, 0});
  report(1000, 8, {3, 0, 0}, {3, 0});
  w.evaluate(at(1000));
  auto e = w.evaluate(at(1100));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].kind, LinkEvent::Kind::kAmbiguous);
  EXPECT_EQ(e[0].links, (std::vector<std::string>{"l2->s1", "s1->l2"}));
}

TEST_F(WatchStateTest, AHostSilentForStaleMsSaysNothingOfItsTuples) {
  report(0, 5, {0, 0, 0}, {0, 0});
  arrived(0, 5, 5, 5, 5, 5);
  EXPECT_EQ(w.counts(at(300)).healthy, 6u);
  EXPECT_EQ(w.counts(at(301)).unknown, 6u);
}

TEST_F(WatchStateTest, ALossOrTwoIsNotAFailure) {
  report(0, 5, {0, 0, 0}, {0, 0});
  arrived(0, 5, 5, 5, 5, 5);
  report(100, 7, {2, 1, 0}, {0, 0});
  arrived(100, 5, 6, 7, 7, 7);
  const WatchCounts c = w.counts(at(100));
  EXPECT_EQ(c.failing, 0u);
  EXPECT_EQ(c.unknown, 2u);
  EXPECT_EQ(c.healthy, 4u);
  w.evaluate(at(100));
  EXPECT_TRUE(w.evaluate(at(300)).empty());
}

// A reconnected agent's new monitor counts from zero; the watch's totals (the
// metrics' counters, the closing line) must not fall, whether its first
// report counts less or more than the old monitor's last.
TEST_F(WatchStateTest, CountsStayCumulativeWhenAHostsMonitorIsOrderedAgain) {
  report(0, 5, {0, 0, 0}, {0, 0});  // 6 tuples x 5 sent
  EXPECT_EQ(w.counts(at(0)).sent, 30u);
  w.restarted(0);  // host 0's 3 tuples: its new monitor has sent 2 each
  w.update(0, std::vector<probe::TupleTally>{row(20, 100, 2, 0, 1), row(20, 101, 2, 0, 2), row(30, 104, 2, 1, 1)},
           at(100));
  WatchCounts c = w.counts(at(100));
  EXPECT_EQ(c.sent, 30u + 3 * 2);
  EXPECT_EQ(c.answered, 30u + 5);
  EXPECT_EQ(c.lost, 1u);
  w.restarted(1);  // host 1's 2 tuples: its new monitor has already sent 9 each
  w.update(1, std::vector<probe::TupleTally>{row(10, 102, 9, 0, 1), row(10, 103, 9, 0, 2)}, at(200));
  c = w.counts(at(200));
  EXPECT_EQ(c.sent, 36u + 2 * 9);
  EXPECT_EQ(c.answered, 35u + 2 * 9);
  w.restarted(7);  // no such host: nothing changes
  EXPECT_EQ(w.counts(at(200)).sent, 54u);
}

TEST_F(WatchStateTest, EachHostIsOrderedItsOwnTuples) {
  const auto h0 = w.tuples_of(0);
  ASSERT_EQ(h0.size(), 3u);
  EXPECT_EQ(h0[0].dst_ip, 20u);
  EXPECT_EQ(h0[0].sport, 100);
  EXPECT_EQ(h0[2].dst_ip, 30u);
  EXPECT_EQ(h0[2].sport, 104);
  EXPECT_EQ(w.tuples_of(1).size(), 2u);
  EXPECT_EQ(w.tuples_of(2).size(), 1u);
  EXPECT_TRUE(w.tuples_of(3).empty());
  EXPECT_EQ(w.hosts_with_tuples(4), 3u);
}

}  // namespace
}  // namespace weft::cli


namespace weft::cli {
namespace {

TEST(WatchMetrics, EveryFamilyAndTheLinkDownAreRendered) {
  WatchCounts c;
  c.tuples = 80;
  c.healthy = 71;
  c.failing = 6;
  c.unknown = 3;
  c.sent = 1000;
  c.answered = 990;
  c.lost = 10;
  c.down = "s2->l3";
  WatchTotals t{.down_events = 2, .up_events = 1, .ambiguous = 0, .unexplained = 4, .last_localise_seconds = 0.3985};
  const std::string m = render_watch_metrics(c, t);
  for (const char* line :
       {"weft_watch_tuples{health=\"healthy\"} 71\n", "weft_watch_tuples{health=\"failing\"} 6\n",
        "weft_watch_tuples{health=\"unknown\"} 3\n", "weft_watch_probes_total{outcome=\"sent\"} 1000\n",
        "weft_watch_probes_total{outcome=\"lost\"} 10\n", "weft_watch_link_down{link=\"s2->l3\"} 1\n",
        "weft_watch_events_total{kind=\"down\"} 2\n", "weft_watch_events_total{kind=\"unexplained\"} 4\n",
        "weft_watch_localise_seconds 0.398500\n", "# TYPE weft_watch_probes_total counter\n"}) {
    EXPECT_NE(m.find(line), std::string::npos) << line;
  }
  c.down.reset();
  EXPECT_EQ(render_watch_metrics(c, t).find("weft_watch_link_down{"), std::string::npos);
}

}  // namespace
}  // namespace weft::cli
