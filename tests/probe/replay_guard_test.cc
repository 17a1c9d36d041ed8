// The replay guard (replay_guard.h) on synthetic clocks: every request of a
// run, replayed at every age up to the acceptance window while the run goes
// on at full rate, is refused; reordering inside the window is not; memory is
// one window per live sender, and a forgotten window re-opens nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>

#include "weft/probe/replay_guard.h"

namespace weft::probe {
namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;
constexpr uint64_t kWindowNs = 30 * kSecond;
constexpr uint64_t kT0 = 1'800'000'000 * kSecond;  // 2027-01-15, any realtime clock
constexpr uint32_t kCampaign = 0x5eed0001, kSenderA = 0x0a000101, kSenderB = 0x0a000102;

struct RateCase {
  uint64_t rate_pps;  // requests per second from sender A
  uint64_t run_s;     // how long A sends (>= 30 s: replays of every age happen while it does)
  uint32_t first_sequence;
};

void PrintTo(const RateCase& c, std::ostream* os) {
  *os << c.rate_pps << " pps for " << c.run_s << " s from sequence " << c.first_sequence;
}

class ReplayAtRateTest : public ::testing::TestWithParam<RateCase> {};

// Sender A sends N = rate x run_s requests; each is replayed once, at an age
// of c/15 of the 30 s window for its class c = k mod 16 (age 0 .. exactly
// 30 s: the acceptance window itself), interleaved with the run in time
// order. Sender B sends every 16th of A's sequences at the same instants.
TEST_P(ReplayAtRateTest, EveryRequestReplayedAtAnyAgeInTheWindowIsRefusedWhileTheRunGoesOn) {
  const RateCase rc = GetParam();
  const uint64_t per_window = rc.rate_pps * (kWindowNs / kSecond);  // requests in 30 s
  const uint64_t n = rc.rate_pps * rc.run_s;
  constexpr uint64_t kClasses = 16;
  // Lags are multiples of kClasses, so step i replays class i % kClasses only.
  std::array<uint64_t, kClasses> lag{};  // in requests
  for (uint64_t c = 0; c < kClasses; ++c) lag[c] = c * per_window / (kClasses - 1) / kClasses * kClasses;
  ASSERT_EQ(lag[kClasses - 1], per_window) << "the oldest replays are exactly 30 s old";
  ReplayGuard g;
  const auto send_time = [&](uint64_t k) { return kT0 + k * kSecond / rc.rate_pps; };
  uint64_t originals_refused = 0, replays_accepted = 0, replayed = 0, behind = 0;
  uint64_t want_replayed = 0, want_behind = 0, oldest_age = 0;
  for (uint64_t i = 0; i < n + lag[kClasses - 1]; ++i) {
    const uint64_t now = send_time(i) + 50'000;  // 50 us in flight
    if (i < n) {
      const uint32_t seq = rc.first_sequence + static_cast<uint32_t>(i);
      originals_refused += g.check(kCampaign, kSenderA, seq, send_time(i), now) != Sighting::kFirst;
      if (i % kClasses == 0) originals_refused += g.check(kCampaign, kSenderB, seq, send_time(i), now) != Sighting::kFirst;
    }
    {
      const uint64_t c = i % kClasses;
      if (i < lag[c]) continue;
      const uint64_t k = i - lag[c];
      if (k >= n) continue;
      oldest_age = std::max(oldest_age, now - send_time(k));
      const uint32_t behind_newest = static_cast<uint32_t>(std::min(i, n - 1) - k);
      (behind_newest < ReplayGuard::kWindow ? want_replayed : want_behind) += 1;
      switch (g.check(kCampaign, kSenderA, rc.first_sequence + static_cast<uint32_t>(k), send_time(k), now)) {
        case Sighting::kFirst: ++replays_accepted; break;
        case Sighting::kReplayed: ++replayed; break;
        case Sighting::kBehindWindow: ++behind; break;
        case Sighting::kTooManySenders: ADD_FAILURE() << "two senders cannot fill the guard"; break;
        case Sighting::kBeforeForgotten: ADD_FAILURE() << "both senders stay live: nothing is forgotten"; break;
      }
    }
  }
  EXPECT_EQ(oldest_age, kWindowNs + 50'000) << "replays of every age, up to the window's edge";
  EXPECT_EQ(originals_refused, 0u) << "every genuine request of both senders is accepted";
  EXPECT_EQ(replays_accepted, 0u);
  EXPECT_EQ(replayed + behind, n) << "every request was replayed once";
  EXPECT_EQ(replayed, want_replayed);
  EXPECT_EQ(behind, want_behind);
  EXPECT_GE(replayed, n / kClasses) << "the age-0 class is inside the window";
  EXPECT_EQ(g.senders(), 2u);
}

// 100 kpps is the default campaign rate; 1 Mpps is 10x that and ~7x the
// fastest backend measured (docs/probe.md). The second case wraps the 32-bit
// sequence mid-run.
INSTANTIATE_TEST_SUITE_P(Rates, ReplayAtRateTest,
                         ::testing::Values(RateCase{100'000, 60, 1}, RateCase{1'000'000, 30, 0xfffff000u}),
                         [](const auto& p) {
                           return std::to_string(p.param.rate_pps) + "pps_for_" + std::to_string(p.param.run_s) +
                                  "s_from_" + std::to_string(p.param.first_sequence);
                         });

struct ReorderCase {
  uint32_t newest;
  uint32_t late;  // arrives after `newest`
  Sighting want_first;
};

void PrintTo(const ReorderCase& c, std::ostream* os) { *os << c.late << " after " << c.newest; }

class ReorderTest : public ::testing::TestWithParam<ReorderCase> {};

TEST_P(ReorderTest, ALateRequestIsAcceptedOnceInsideTheWindowAndRefusedBehindIt) {
  const ReorderCase c = GetParam();
  ReplayGuard g;
  ASSERT_EQ(g.check(kCampaign, kSenderA, c.newest, kT0, kT0), Sighting::kFirst);
  EXPECT_EQ(g.check(kCampaign, kSenderA, c.late, kT0, kT0), c.want_first);
  const Sighting again = c.want_first == Sighting::kFirst ? Sighting::kReplayed : c.want_first;
  EXPECT_EQ(g.check(kCampaign, kSenderA, c.late, kT0, kT0), again);
  EXPECT_EQ(g.check(kCampaign, kSenderA, c.newest, kT0, kT0), Sighting::kReplayed);
}

INSTANTIATE_TEST_SUITE_P(
    Window, ReorderTest,
    ::testing::Values(ReorderCase{5000, 5000 - 1, Sighting::kFirst},
                      ReorderCase{5000, 5000 - (ReplayGuard::kWindow - 1), Sighting::kFirst},
                      ReorderCase{5000, 5000 - ReplayGuard::kWindow, Sighting::kBehindWindow},
                      ReorderCase{5000, 3, Sighting::kBehindWindow},
                      ReorderCase{7, 0xffffff00u, Sighting::kFirst},  // 263 before 7, across the wrap
                      ReorderCase{0x80000000u, 0, Sighting::kBehindWindow}));

// A sender restarted under the same run (an agent process restarted while a
// watch goes on) numbers from 1 again, later than anything it sent before:
// accepted at once (it was refused as replayed or behind for 30 s), while
// every request of the old numbering stays refused and the new numbering
// keeps its own guarantee.
struct RestartCase {
  uint32_t sent_before;  // sequences 1..sent_before accepted before the restart
};

class RestartTest : public ::testing::TestWithParam<RestartCase> {};

TEST_P(RestartTest, ARestartedSenderIsAcceptedAndNothingOldIsAcceptedAgain) {
  const uint32_t n = GetParam().sent_before;
  ReplayGuard g;
  const auto old_time = [](uint32_t s) { return kT0 + s * 1000; };  // 1 us apart
  for (uint32_t s = 1; s <= n; ++s) ASSERT_EQ(g.check(kCampaign, kSenderA, s, old_time(s), old_time(s)), Sighting::kFirst);
  const uint64_t restart = old_time(n) + 2 * kSecond;
  for (uint32_t s = 1; s <= 3; ++s) {
    EXPECT_EQ(g.check(kCampaign, kSenderA, s, restart + s, restart + s), Sighting::kFirst) << "restarted, sequence " << s;
  }
  for (uint32_t s : {1u, 2u, n / 2 + 1, n}) {  // the old numbering's requests, replayed late
    EXPECT_EQ(g.check(kCampaign, kSenderA, s, old_time(s), restart + 10), Sighting::kBeforeForgotten) << s;
  }
  EXPECT_EQ(g.check(kCampaign, kSenderA, 2, restart + 2, restart + 11), Sighting::kReplayed);
  EXPECT_EQ(g.check(kCampaign, kSenderA, 4, restart + 4, restart + 12), Sighting::kFirst);
  EXPECT_EQ(g.check(kCampaign, kSenderB, 1, restart, restart), Sighting::kFirst) << "other senders are untouched";
  EXPECT_EQ(g.senders(), 2u);
}

// Inside the window (seen sequences), exactly the window, and far behind it.
INSTANTIATE_TEST_SUITE_P(Numberings, RestartTest,
                         ::testing::Values(RestartCase{3}, RestartCase{ReplayGuard::kWindow},
                                           RestartCase{ReplayGuard::kWindow + 1}, RestartCase{70000}),
                         [](const auto& p) { return "After" + std::to_string(p.param.sent_before); });

// A late request of the sender's own numbering is not taken for a restart:
// it was sent before the newest, so the window judges it as before.
TEST(ReplayGuardTest, ALateRequestSentBeforeTheNewestIsNotARestart) {
  ReplayGuard g;
  ASSERT_EQ(g.check(kCampaign, kSenderA, 9000, kT0 + 9000, kT0 + 9000), Sighting::kFirst);
  EXPECT_EQ(g.check(kCampaign, kSenderA, 100, kT0 + 100, kT0 + 9001), Sighting::kBehindWindow);
  EXPECT_EQ(g.check(kCampaign, kSenderA, 9000, kT0 + 9000, kT0 + 9002), Sighting::kReplayed);
  EXPECT_EQ(g.check(kCampaign, kSenderA, 8999, kT0 + 8999, kT0 + 9003), Sighting::kFirst);
}

TEST(ReplayGuardTest, AnAdvanceOfMoreThanTheWindowClearsEverySlot) {
  ReplayGuard g;
  for (uint32_t s = 1; s <= ReplayGuard::kWindow; ++s) ASSERT_EQ(g.check(kCampaign, kSenderA, s, kT0, kT0), Sighting::kFirst);
  const uint32_t far = 3 * ReplayGuard::kWindow + 17;
  ASSERT_EQ(g.check(kCampaign, kSenderA, far, kT0, kT0), Sighting::kFirst);
  for (uint32_t s = far - ReplayGuard::kWindow + 1; s < far; ++s) {
    ASSERT_EQ(g.check(kCampaign, kSenderA, s, kT0, kT0), Sighting::kFirst) << s << ": never seen";
  }
  EXPECT_EQ(g.check(kCampaign, kSenderA, far - ReplayGuard::kWindow, kT0, kT0), Sighting::kBehindWindow);
}

TEST(ReplayGuardTest, SendersAndCampaignsHaveWindowsOfTheirOwn) {
  ReplayGuard g;
  EXPECT_EQ(g.check(kCampaign, kSenderA, 9, kT0, kT0), Sighting::kFirst);
  EXPECT_EQ(g.check(kCampaign, kSenderB, 9, kT0, kT0), Sighting::kFirst);
  EXPECT_EQ(g.check(kCampaign + 1, kSenderA, 9, kT0, kT0), Sighting::kFirst);
  EXPECT_EQ(g.check(kCampaign, kSenderA, 9, kT0, kT0), Sighting::kReplayed);
  EXPECT_EQ(g.senders(), 3u);
}

TEST(ReplayGuardTest, ANewSenderBeyondTheMaximumIsRefusedUntilAWindowExpires) {
  ReplayGuard g({.max_senders = 3, .forget_after_ns = kWindowNs});
  for (uint32_t s = 0; s < 3; ++s) ASSERT_EQ(g.check(kCampaign, kSenderA + s, 1, kT0, kT0), Sighting::kFirst);
  EXPECT_EQ(g.check(kCampaign, kSenderA + 3, 1, kT0, kT0), Sighting::kTooManySenders);
  // Senders 1 and 2 send again 20 s later; sender 0's newest request becomes
  // older than the window, and the next sweep (at most a second later) frees
  // its slot, and only its.
  const uint64_t t20 = kT0 + 20 * kSecond, later = kT0 + kWindowNs + kSecond;
  ASSERT_EQ(g.check(kCampaign, kSenderA + 1, 2, t20, t20), Sighting::kFirst);
  ASSERT_EQ(g.check(kCampaign, kSenderA + 2, 2, t20, t20), Sighting::kFirst);
  EXPECT_EQ(g.check(kCampaign, kSenderA + 3, 1, later, later), Sighting::kFirst);
  EXPECT_EQ(g.senders(), 3u);
  EXPECT_EQ(g.check(kCampaign, kSenderA + 4, 1, later, later + 1), Sighting::kTooManySenders);
  EXPECT_EQ(g.check(kCampaign, kSenderA + 1, 2, t20, later + 2), Sighting::kReplayed) << "a live window was kept";
}

TEST(ReplayGuardTest, AWindowIsKeptWhileItsNewestRequestIsInsideTheAcceptanceWindow) {
  ReplayGuard g({.max_senders = 2, .forget_after_ns = kWindowNs});
  ASSERT_EQ(g.check(kCampaign, kSenderA, 1, kT0, kT0), Sighting::kFirst);
  // Exactly at the edge a request is still accepted as fresh (validate.cc),
  // so its window must survive a sweep there.
  const uint64_t edge = kT0 + kWindowNs;
  ASSERT_EQ(g.check(kCampaign, kSenderB, 1, edge, edge), Sighting::kFirst);
  EXPECT_EQ(g.check(kCampaign, kSenderA, 1, kT0, edge), Sighting::kReplayed);
  EXPECT_EQ(g.senders(), 2u);
}

}  // namespace
}  // namespace weft::probe
