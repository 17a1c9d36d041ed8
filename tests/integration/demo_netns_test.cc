// weft demo end to end on the emulated fabric (label netns): weft's plan
// against ECMP, measured and verified, then with a failed link re-probed and
// re-planned; nothing left behind after a normal run, after Ctrl-C (SIGINT)
// mid-run, and after SIGKILL (the reaper). Skips with the reason where
// network namespaces cannot be built.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "demo_runner.h"
#include "netns_fabric.h"
#include "weft/common/file_util.h"

namespace weft::test {
namespace {

namespace fs = std::filesystem;

// The demo's acceptance run at a test's size: 5 trials, each a new ECMP
// hash seed; (b) within 15% of the ideal, (b)/(a) >= 1.5 on average, every
// AllReduce verified (the demo fails otherwise); then spine 2 - leaf 3 fails:
// the re-probe finds it dead, the new plan meets the surviving links' bound
// and (b) stays within 15% of the lower ideal; nothing left behind.
TEST(DemoNetnsTest, WeftsPlanReachesTheIdealAndBeatsEcmpAlsoAfterALinkFailsThenCleansUp) {
  WEFT_SKIP_UNLESS_NETNS();
  const std::string dir = test_dir(), prefix = fmt::format("wfdt{}a-", ::getpid());
  Demo d = start_demo(dir, {"--size", "16MiB", "--trials", "5", "--rate-mbit", "200", "--fail", "2:3", "--prefix",
                            prefix, "--work-dir", dir + "/w", "--json", dir + "/r.json", "--svg", dir + "/d.svg"});
  const std::string load_before = load_average();
  const int st = wait_for(d.pid, std::chrono::seconds(400));
  const std::string out = slurp(d.out);
  std::cout << out << slurp(d.err) << "[load] before: " << load_before << "; after: " << load_average() << "\n";
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "weft demo failed (its output above)";
  const auto j = nlohmann::json::parse(slurp(dir + "/r.json"));
  ASSERT_EQ(j["trials"].size(), 6u) << "5 trials and the failed-link run";
  for (int i = 0; i < 5; ++i) {
    const auto& t = j["trials"][static_cast<size_t>(i)];
    EXPECT_FALSE(t["failed_link"].get<bool>());
    EXPECT_EQ(t["max_load_b"], 1) << "the checker: load 1 on every link in every step";
    EXPECT_EQ(t["ideal_Bps"].get<double>(), 25e6) << "the ideal of a non-blocking fabric is the link rate";
    // A trial's floor: on this shared 2-core machine one trial in several
    // dips to ~0.8 when other work takes the CPU the kernel forwards with.
    EXPECT_GE(t["b_over_ideal"].get<double>(), 0.75) << "trial " << t["trial"];
  }
  EXPECT_GE(j["summary"]["b_over_ideal_mean"].get<double>(), 0.85);
  EXPECT_GE(j["summary"]["ratio_mean"].get<double>(), 1.5);
  // Leaf 3 keeps 3 uplinks for 4 hosts: the HD steps at distance 4 and 8
  // send all 4 off the leaf (docs/demo.md), so one round would need 2 flows
  // on a link; the plan runs them in 2 rounds with one flow per link at once.
  const auto& f = j["trials"][5];
  EXPECT_TRUE(f["failed_link"].get<bool>());
  EXPECT_NE(out.find("dead: spine 2 - leaf 3"), std::string::npos) << "the re-probe finds the failed link";
  EXPECT_EQ(f["max_load_b"], 1) << "the checker: max load 1 on the surviving links, per round";
  EXPECT_EQ(f["lower_bound_b"], 1);
  EXPECT_EQ(f["rounds_b"], 2);
  EXPECT_EQ(f["steps_in_rounds_b"], 4) << "rs and ag at distances 4 and 8";
  EXPECT_EQ(f["single_round_bound_b"], 2);
  // 4 of 8 steps (3/16 of the bytes) in 2 rounds: 5/6 of the link rate
  // (tests/routing/rounds_test.cc derives it).
  EXPECT_NEAR(f["ideal_Bps"].get<double>(), 25e6 * 5 / 6, 25e3) << "the simulator with rounds on the surviving links";
  EXPECT_GE(f["b_over_ideal"].get<double>(), 0.85) << "(b) within 15% of the new ideal";
  std::cout << fmt::format("[figure] demo 16 MiB, 5 trials: (b)/(a) mean {:.2f} (min {:.2f}, max {:.2f}); (b)/ideal "
                           "mean {:.2f} (min {:.2f}); failed link: (b)/new ideal {:.2f} (ideal {:.1f} Mbit/s), "
                           "load {}/{} in {} rounds; {:.0f} s\n",
                           j["summary"]["ratio_mean"].get<double>(), j["summary"]["ratio_min"].get<double>(),
                           j["summary"]["ratio_max"].get<double>(), j["summary"]["b_over_ideal_mean"].get<double>(),
                           j["summary"]["b_over_ideal_min"].get<double>(), f["b_over_ideal"].get<double>(),
                           f["ideal_Bps"].get<double>() * 8 / 1e6, f["max_load_b"].get<int>(),
                           f["lower_bound_b"].get<int>(), f["rounds_b"].get<int>(), j["seconds"].get<double>());
  const std::string svg = slurp(dir + "/d.svg");
  EXPECT_NE(svg.find("(b) weft order + planned ports"), std::string::npos);
  EXPECT_NE(svg.find("(b) after the link failed"), std::string::npos);
  EXPECT_NE(svg.find("s2 - l3: 0% (down)"), std::string::npos) << "the failed link drawn down";
  expect_clean(prefix, dir + "/w");
  fs::remove_all(dir);
}

// --fail-during with a gray failure (never withdrawn): (a), (b) and (c) each
// run back-to-back calls while spine 2 - leaf 3 is cut and restored; every
// event takes effect within 0.2 s of its time, calls complete before the cut
// and after the restore, every call is verified (the demo fails otherwise),
// nothing is left. (c) is watched: the cable is localised within 1 s of the
// cut, every rank runs the re-plan within 2.5 s of it (inside the call the
// cut stalled), and the full plan again within 2.5 s of the restore.
TEST(DemoNetnsTest, ALinkThatFailsMidJobIsLocalisedAndRoutedAroundLiveWithEveryCallVerified) {
  WEFT_SKIP_UNLESS_NETNS();
  const std::string dir = test_dir(), prefix = fmt::format("wfdt{}t-", ::getpid());
  Demo d = start_demo(dir, {"--fail-during", "2:3@3s:7s", "--timeline", "10s", "--call-size", "2MiB", "--converge-ms",
                            "0", "--prefix", prefix, "--work-dir", dir + "/w", "--json", dir + "/t.json", "--svg",
                            dir + "/t.svg"});
  const int st = wait_for(d.pid, std::chrono::seconds(300));
  const std::string out = slurp(d.out);
  std::cout << out << slurp(d.err) << "[load] " << load_average() << "\n";
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "weft demo failed (its output above)";
  const auto j = nlohmann::json::parse(slurp(dir + "/t.json"));
  ASSERT_EQ(j["runs"].size(), 3u);
  for (const auto& run : j["runs"]) {
    std::vector<std::pair<std::string, double>> faults;
    for (const auto& e : run["events"]) {
      if (e["what"] == "cut" || e["what"] == "withdrawn" || e["what"] == "restored") {
        faults.emplace_back(e["what"].get<std::string>(), e["at_s"].get<double>());
      }
    }
    ASSERT_EQ(faults.size(), 2u) << run["name"];
    const std::vector<std::pair<std::string, double>> planned = {{"cut", 3.0}, {"restored", 7.0}};
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(faults[i].first, planned[i].first);
      EXPECT_NEAR(faults[i].second, planned[i].second, 0.2) << run["name"] << " " << planned[i].first;
    }
    int before = 0, after = 0;
    double last_end = 0;
    for (const auto& c : run["calls"]) {
      const double at = c["at_s"].get<double>(), end = at + c["seconds"].get<double>();
      EXPECT_GE(at + 1e-3, last_end) << "calls run one after another";
      last_end = end;
      before += end <= 3.0;
      after += at >= 7.0;
      EXPECT_GT(c["busbw_mbit"].get<double>(), 0);
    }
    EXPECT_GE(before, 1) << run["name"] << ": a call completes before the cut";
    // (a) and (b) wait for the link: their stalled call ends after the
    // restore, once TCP's backed-off retransmission comes (which may be past
    // the timeline's end); (c) runs new calls after the restore.
    EXPECT_GE(last_end, 7.0) << run["name"] << ": the stalled call ends, verified, after the restore";
    if (&run == &j["runs"][2]) {
      EXPECT_GE(after, 1) << run["name"] << ": calls run again after the restore";
    }
    EXPECT_GE(last_end, 10.0) << "the series runs its whole timeline";
  }
  const auto& live = j["live"];
  EXPECT_GE(live["localised_s"].get<double>(), 0);
  EXPECT_LT(live["localised_s"].get<double>(), 1.0);
  EXPECT_GE(live["adopted_s"].get<double>(), 0) << "the re-plan was run before the restore";
  // The acceptance's 2 s is measured by the full demo (bench/results); here
  // "adopted" is the end of the re-run call, on a CI machine that may be
  // loaded: 2.5 s.
  EXPECT_LT(live["adopted_s"].get<double>(), 2.5);
  EXPECT_GE(live["back_adopted_s"].get<double>(), 0) << "the full plan was run again";
  EXPECT_LT(live["back_adopted_s"].get<double>(), 2.5);
  bool named = false;
  for (const auto& e : j["runs"][2]["events"]) {
    const std::string w = e["what"];
    named |= w.rfind("localised ", 0) == 0 && w.find("s2") != std::string::npos;
  }
  EXPECT_TRUE(named) << "the watcher names a link of spine 2";
  EXPECT_NE(slurp(dir + "/t.svg").find(">restored</text>"), std::string::npos);
  expect_clean(prefix, dir + "/w");
  fs::remove_all(dir);
}

// Ctrl-C mid-run: weft stops waiting, stops every process, deletes every
// namespace and its own work directory, and exits 130.
TEST(DemoNetnsTest, SigintMidRunLeavesNothingBehind) {
  WEFT_SKIP_UNLESS_NETNS();
  const std::string dir = test_dir(), prefix = fmt::format("wfdt{}i-", ::getpid());
  Demo d = start_demo(dir, {"--size", "16MiB", "--trials", "3", "--rate-mbit", "200", "--prefix", prefix, "--svg", ""});
  ASSERT_TRUE(wait_for_text(d.out, "(a) input order", d.pid, std::chrono::seconds(180))) << slurp(d.err);
  const std::string out = slurp(d.out);
  const auto at = out.find("work dir ");
  ASSERT_NE(at, std::string::npos);
  const std::string work = out.substr(at + 9, out.find('\n', at) - at - 9);
  ASSERT_FALSE(namespaces_with(prefix).empty());
  ASSERT_FALSE(processes_with(work).empty()) << "agents and workers run before the interrupt";
  ::kill(d.pid, SIGINT);
  const int st = wait_for(d.pid, std::chrono::seconds(60));
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 130) << st << " " << slurp(d.err);
  EXPECT_NE(slurp(d.err).find("interrupted by signal 2"), std::string::npos) << slurp(d.err);
  expect_clean(prefix, work, work);
  fs::remove_all(dir);
}

// SIGKILL cannot be caught: the reaper process sees weft's pipe close and
// runs the fabric's `down` (which kills, by PID, what runs in its namespaces).
TEST(DemoNetnsTest, SigkillLeavesTheCleanupToTheReaper) {
  WEFT_SKIP_UNLESS_NETNS();
  const std::string dir = test_dir(), prefix = fmt::format("wfdt{}k-", ::getpid());
  Demo d = start_demo(dir, {"--size", "16MiB", "--trials", "3", "--rate-mbit", "200", "--prefix", prefix,
                            "--work-dir", dir + "/w", "--svg", ""});
  ASSERT_TRUE(wait_for_text(d.out, "trial 1/", d.pid, std::chrono::seconds(180))) << slurp(d.err);
  ASSERT_FALSE(namespaces_with(prefix).empty());
  ::kill(d.pid, SIGKILL);
  wait_for(d.pid, std::chrono::seconds(10));
  expect_clean(prefix, dir + "/w");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace weft::test
