// weft demo --fabric rail (label netns): hybrid AllReduce on a 2-plane x
// 2-rail x 4-host fabric of namespaces, one rank per NIC port, (a) ECMP and
// (b) the allreduce-hybrid plan, every result verified, both busbw figures
// beside the ideal, and nothing left behind; flags a rail fabric has no use
// for fail with one message.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "demo_runner.h"
#include "netns_fabric.h"

namespace weft::test {
namespace {

namespace fs = std::filesystem;

// (b)/ideal measured 0.62-0.79 on the 2-core build machine, 0.77-0.79 at
// load average ~2 and 0.62-0.68 at 2-5.5 (bench/results/2026-11-26-rail-demo.md):
// the ideal counts the inter-host steps only, while each host's 4 ranks also
// reduce-scatter and allgather over TCP inside the host, on the CPUs that
// forward the fabric's packets. (b)/(a) is printed, not held: 1.15-1.26 at
// 64 MiB, but 1.02-1.08 at 16 MiB on a loaded machine, where the CPU and not
// the collided uplink sets the pace.
constexpr double kMinPlannedOverIdeal = 0.55;

TEST(DemoRail, HybridPlannedBesideEcmpVerifiedNearTheIdealAndNothingLeftBehind) {
  WEFT_SKIP_UNLESS_NETNS();
  const std::string dir = test_dir();
  const std::string prefix = fmt::format("wfr{}-", ::getpid() % 100000);
  Demo d = start_demo(dir, {"--fabric", "rail", "--size", "32MiB", "--trials", "2", "--seed", "1", "--prefix", prefix, "--work-dir",
                            dir + "/w", "--json", dir + "/r.json", "--timeout", "30"});
  const int st = wait_for(d.pid, std::chrono::seconds(40));
  const std::string out = slurp(d.out), err = slurp(d.err);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out << err << "[load] " << load_average();
  const auto j = nlohmann::json::parse(slurp(dir + "/r.json"), nullptr, false);
  ASSERT_TRUE(j.is_object()) << "no JSON results";
  EXPECT_EQ(j["fabric"]["kind"], "rail");
  ASSERT_EQ(j["trials"].size(), 2u);
  for (const auto& t : j["trials"]) {
    SCOPED_TRACE(fmt::format("trial {}\n{}[load] {}", t["trial"].get<int>(), out, load_average()));
    EXPECT_GT(t["busbw_a_Bps"].get<double>(), 0) << "ECMP measured beside the plan";
    EXPECT_GE(t["b_over_ideal"].get<double>(), kMinPlannedOverIdeal);
    EXPECT_EQ(t["max_load_b"].get<int>(), t["lower_bound_b"].get<int>());
    EXPECT_EQ(t["steps_above_bound_b"].get<int>(), 0);
  }
  // 16 ranks, one per NIC port; (a) and (b) of both trials verified and printed.
  EXPECT_NE(out.find("one rank per NIC port (16 ranks)"), std::string::npos) << out;
  size_t verified = 0;
  for (size_t at = out.find("result verified"); at != std::string::npos; at = out.find("result verified", at + 1)) ++verified;
  EXPECT_EQ(verified, 4u) << out;
  EXPECT_NE(out.find("(a) busbw  (b) busbw      ideal"), std::string::npos) << out;
  std::cout << fmt::format("[figure] rail 2x2x4, 32 MiB:{}\n", [&] {
    std::string s;
    for (const auto& t : j["trials"]) {
      s += fmt::format(" seed {} (a) {:.0f} (b) {:.0f} ideal {:.0f} Mbit/s;", t["hash_seed"].get<int>(),
                       t["busbw_a_Bps"].get<double>() * 8e-6, t["busbw_b_Bps"].get<double>() * 8e-6,
                       t["ideal_Bps"].get<double>() * 8e-6);
    }
    return s;
  }());
  expect_clean(prefix, dir + "/w");
  fs::remove_all(dir);
}

struct BadFlags {
  std::string name;
  std::vector<std::string> args;
  std::string message;
  friend void PrintTo(const BadFlags& b, std::ostream* os) { *os << b.name; }
};

class DemoRailBadInput : public ::testing::TestWithParam<BadFlags> {};

// Refused before anything is built: exit status 1 (no root needed), one line naming the flags.
TEST_P(DemoRailBadInput, OneClearMessageAndNothingBuilt) {
  const std::string dir = test_dir();
  const std::string prefix = fmt::format("wfb{}-", ::getpid() % 100000);
  std::vector<std::string> args = GetParam().args;
  for (const char* a : {"--prefix", prefix.c_str(), "--work-dir", (dir + "/w").c_str()}) args.emplace_back(a);
  Demo d = start_demo(dir, args);
  const int st = wait_for(d.pid, std::chrono::seconds(20));
  const std::string err = slurp(d.err);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) != 0);
  EXPECT_NE(err.find(GetParam().message), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir + "/w")) << "nothing built";
  EXPECT_TRUE(namespaces_with(prefix).empty());
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Flags, DemoRailBadInput,
    ::testing::Values(BadFlags{"spine_leaf_flags", {"--fabric", "rail", "--leaves", "3", "--fail", "1:2"},
                               "--fabric rail does not take --leaves, --fail"},
                      BadFlags{"zero_planes", {"--fabric", "rail", "--planes", "0"}, "--planes 0 is not 1..4"},
                      BadFlags{"rails_without_rail", {"--rails", "4"}, "--rails needs --fabric rail"},
                      BadFlags{"unknown_fabric", {"--fabric", "torus"}, "--fabric 'torus' is not spine-leaf or rail"}),
    [](const ::testing::TestParamInfo<BadFlags>& i) { return i.param.name; });

}  // namespace
}  // namespace weft::test
