// The UDP sender's sendmmsg(2) loop (send_loop.h) against scripted results:
// a full socket buffer is waited out per stall, not once per group.
#include <gtest/gtest.h>

#include <cerrno>
#include <vector>

#include "weft/probe/send_loop.h"

namespace weft::probe {
namespace {

// Each call takes the next scripted result: > 0 sends that many, or -1 with
// that errno.
struct ScriptedSendmmsg {
  struct Step {
    int result;
    int err;
  };
  std::vector<Step> steps;
  size_t at = 0;
  int operator()(size_t) {
    const Step s = at < steps.size() ? steps[at++] : Step{1, 0};
    errno = s.err;
    return s.result;
  }
};

// Three probes, each sent only after the buffer was full 999 times in a row:
// within a budget of 1000 every time, so all three leave. (A budget spent
// over the whole group gave up the second and third at their first EAGAIN.)
TEST(SendLoopTest, EveryStallGetsTheWholeSpinBudgetAfterASendSucceeds) {
  ScriptedSendmmsg script;
  for (int probe = 0; probe < 3; ++probe) {
    for (int i = 0; i < 999; ++i) script.steps.push_back({-1, EAGAIN});
    script.steps.push_back({1, 0});
  }
  const SendLoopTally t = send_until_done(3, 1000, std::ref(script));
  EXPECT_EQ(t.sent, 3u);
  EXPECT_EQ(t.errors, 0u);
  EXPECT_EQ(script.at, 3000u);
}

// A buffer that stays full: the first probe spends the budget and is given
// up; the next ones are given up at their first EAGAIN, until a send
// succeeds and refills the budget.
TEST(SendLoopTest, AStuckSocketGivesUpTheRestAtOnceUntilASendSucceeds) {
  ScriptedSendmmsg script;
  for (int i = 0; i < 10 + 1 + 1; ++i) script.steps.push_back({-1, ENOBUFS});
  script.steps.push_back({1, 0});
  for (int i = 0; i < 9; ++i) script.steps.push_back({-1, EAGAIN});
  script.steps.push_back({1, 0});
  // budget 10: probe 0 after 10 tries, probes 1 and 2 after one each; probe 3
  // sent; probe 4 sent after 9 stalls.
  const SendLoopTally t = send_until_done(5, 10, std::ref(script));
  EXPECT_EQ(t.sent, 2u);
  EXPECT_EQ(t.errors, 3u);
  EXPECT_EQ(script.at, 23u);
}

// An ICMP error recorded on the socket fails the next send once (ip(7)
// IP_RECVERR): the probe is sent again, not lost; a third in a row gives it up.
TEST(SendLoopTest, ARecordedIcmpErrorIsRetriedTwiceThenTheProbeIsGivenUp) {
  ScriptedSendmmsg script;
  script.steps = {{-1, ECONNREFUSED}, {1, 0}, {-1, EHOSTUNREACH}, {-1, EHOSTUNREACH}, {-1, EHOSTUNREACH}, {1, 0},
                  {-1, EPERM}, {1, 0}};
  const SendLoopTally t = send_until_done(4, 1000, std::ref(script));
  EXPECT_EQ(t.sent, 2u);
  EXPECT_EQ(t.errors, 2u);
  EXPECT_EQ(script.at, 7u);
}

}  // namespace
}  // namespace weft::probe
