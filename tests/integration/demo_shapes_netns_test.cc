// weft demo on every small spine-leaf shape (label netns): spines, leaves
// and hosts per leaf each 2..4, the oversubscribed shapes (fewer spines than
// hosts per leaf) included. Each runs the whole pipeline twice — bring-up
// probe, rank, route, AllReduce (a) and (b), then a targeted re-probe under
// a new hash seed, route, AllReduce again — with a random seed (printed, so
// a failure can be rerun with --seed). Every trial must exit 0 with its
// results verified (the demo fails otherwise), every step of the plan at its
// lower bound per round by the checker, and nothing left behind.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "demo_runner.h"
#include "netns_fabric.h"

namespace weft::test {
namespace {

namespace fs = std::filesystem;

struct Shape {
  int spines, leaves, hosts;
};

class DemoShapes : public ::testing::TestWithParam<Shape> {};

TEST_P(DemoShapes, EveryTrialRunsVerifiedOnAPlanAtItsBoundAndLeavesNothingBehind) {
  WEFT_SKIP_UNLESS_NETNS();
  const Shape s = GetParam();
  const uint32_t seed = std::random_device()() % 100000 + 1;
  const std::string dir = test_dir();
  const std::string prefix = fmt::format("wfs{}{}{}{}-", s.spines, s.leaves, s.hosts, ::getpid() % 10000);
  Demo d = start_demo(dir, {"--spines", std::to_string(s.spines), "--leaves", std::to_string(s.leaves), "--hosts",
                            std::to_string(s.hosts), "--size", "1MiB", "--trials", "2", "--seed",
                            std::to_string(seed), "--prefix", prefix, "--work-dir", dir + "/w", "--json",
                            dir + "/r.json", "--svg", "", "--timeout", "60"});
  const int st = wait_for(d.pid, std::chrono::seconds(100));
  const std::string out = slurp(d.out), err = slurp(d.err);
  const std::string rerun = fmt::format("weft demo --spines {} --leaves {} --hosts {} --size 1MiB --trials 2 --seed {}",
                                        s.spines, s.leaves, s.hosts, seed);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
      << "failed: " << rerun << "\n" << out << err << "[load] " << load_average();
  const auto j = nlohmann::json::parse(slurp(dir + "/r.json"), nullptr, false);
  ASSERT_TRUE(j.is_object()) << "no JSON results";
  ASSERT_EQ(j["trials"].size(), 2u);
  std::string figures;
  for (const auto& t : j["trials"]) {
    SCOPED_TRACE(rerun + fmt::format(", trial {}", t["trial"].get<int>()));
    EXPECT_EQ(t["steps_above_bound_b"].get<int>(), 0) << "every step of (b) at its bound per round";
    EXPECT_EQ(t["max_load_b"].get<int>(), t["lower_bound_b"].get<int>());
    figures += fmt::format(" trial {}: load {}/{}{} (b)/ideal {:.2f} (b)/(a) {:.2f};", t["trial"].get<int>(),
                           t["max_load_b"].get<int>(), t["lower_bound_b"].get<int>(),
                           t["rounds_b"].get<int>() > 1 ? fmt::format(" in {} rounds", t["rounds_b"].get<int>()) : "",
                           t["b_over_ideal"].get<double>(), t["ratio"].get<double>());
  }
  EXPECT_NE(out.find("probe: targeted campaign"), std::string::npos) << "trial 2 re-probes the HD pairs";
  std::cout << fmt::format("[figure] {}x{}x{}{} seed {}:{}\n", s.spines, s.leaves, s.hosts,
                           s.spines < s.hosts ? " (oversubscribed)" : "", seed, figures);
  expect_clean(prefix, dir + "/w");
  fs::remove_all(dir);
}

std::vector<Shape> every_small_shape() {
  std::vector<Shape> out;
  for (int s = 2; s <= 4; ++s)
    for (int l = 2; l <= 4; ++l)
      for (int h = 2; h <= 4; ++h) out.push_back({s, l, h});
  return out;
}

INSTANTIATE_TEST_SUITE_P(EverySmallShape, DemoShapes, ::testing::ValuesIn(every_small_shape()),
                         [](const ::testing::TestParamInfo<Shape>& i) {
                           return fmt::format("s{}_l{}_h{}", i.param.spines, i.param.leaves, i.param.hosts);
                         });

}  // namespace
}  // namespace weft::test
