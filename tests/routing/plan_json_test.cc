// plan_to_json writes a plan as nlohmann::json's dump(1) of the plan's JSON
// tree would (plan_file.cc): plans stay byte-identical to those earlier weft
// versions wrote from that tree.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/routing/plan.h"

namespace weft::routing {
namespace {

using json = nlohmann::json;

// The plan as a JSON tree, keys as plan.h documents them, optional ones only when set.
std::string tree_dump(const RoutePlan& p) {
  json flows = json::array();
  for (const auto& f : p.flows) {
    json jf = {{"src_rank", f.src_rank}, {"dst_rank", f.dst_rank}, {"src_host", f.src_host},
               {"dst_host", f.dst_host}, {"protocol", f.protocol}, {"sport", f.sport},
               {"dport", f.dport},       {"path", f.path},         {"steps", f.steps}};
    if (!f.src_nic.empty()) jf["src_nic"] = f.src_nic;
    if (!f.dst_nic.empty()) jf["dst_nic"] = f.dst_nic;
    if (!f.src_addr.empty()) jf["src_addr"] = f.src_addr;
    if (!f.dst_addr.empty()) jf["dst_addr"] = f.dst_addr;
    if (f.conn != 0) jf["conn"] = f.conn;
    if (f.qp != 0) jf["qp"] = f.qp;
    if (f.dqpn != 0) jf["dqpn"] = f.dqpn;
    if (std::any_of(f.rounds.begin(), f.rounds.end(), [](int r) { return r != 0; })) jf["rounds"] = f.rounds;
    flows.push_back(std::move(jf));
  }
  json steps = json::array();
  for (const auto& s : p.steps) {
    json js = {{"step", s.step}, {"phase", s.phase}, {"max_load", s.max_load}, {"lower_bound", s.lower_bound}};
    if (s.rounds != 1) js["rounds"] = s.rounds;
    steps.push_back(std::move(js));
  }
  json root = {{"version", p.version}, {"collective", p.collective}, {"topology", p.topology},
               {"ranks", p.ranks},     {"flows", std::move(flows)},   {"steps", std::move(steps)}};
  return root.dump(1) + "\n";
}

TEST(PlanJson, AnEmptyPlanIsWrittenAsItsTreeIs) {
  RoutePlan p;
  EXPECT_EQ(plan_to_json(p), tree_dump(p));
  p.collective = "allreduce-ring", p.topology = "t", p.ranks = 1;
  p.steps = {{0, "ring", 0, 0, 1}};
  EXPECT_EQ(plan_to_json(p), tree_dump(p));
}

// Names that need escaping (quotes, backslashes, control characters) and
// names beyond ASCII, every optional field, empty paths and steps.
TEST(PlanJson, AwkwardNamesAndEveryOptionalFieldAreWrittenAsTheTreeIs) {
  RoutePlan p;
  p.collective = "allreduce-hd";
  p.topology = "fab \"x\"\\y\tz\x01\x1f\x7f";
  p.ranks = 3;
  PlanFlow a{0, 1, "h\"1", "h\\2", "eth\n0", "", "udp", 49152, 4791, {"l1", "s\xc3\xa9", "l2"}, {0, 5}, {0, 2},
             "10.0.0.1", "10.0.1.1", 3, 7, 0xABCDEF};
  PlanFlow b{2, 0, "h3", "h1", "", "", "tcp", 65535, 1, {}, {}, {}, "", "", 0, 0, 0};
  PlanFlow c{1, 2, "\xe6\x97\xa5\xe6\x9c\xac", "h3", "", "mlx5_0", "udp", 1, 65535, {"leaf"}, {3}, {}, "", "", 0, 1, 2};
  p.flows = {a, b, c};
  p.steps = {{0, "rs", 1, 1, 1}, {5, "a\"g", 2, 1, 3}, {3, "", 0, 0, 1}};
  EXPECT_EQ(plan_to_json(p), tree_dump(p));
  auto back = parse_plan(plan_to_json(p));
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(*back, p);
}

// Random plans of awkward sizes.
class PlanJsonRandom : public ::testing::TestWithParam<int> {};

TEST_P(PlanJsonRandom, IsWrittenAsItsTreeIs) {
  std::mt19937 rng(static_cast<unsigned>(GetParam()));
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  RoutePlan p;
  p.collective = "allreduce-hybrid";
  p.topology = "rail-" + std::to_string(GetParam());
  p.ranks = 1 + pick(97);
  const int flows = pick(3) == 0 ? 0 : 1 + pick(211);
  for (int i = 0; i < flows; ++i) {
    PlanFlow f;
    f.src_rank = pick(p.ranks), f.dst_rank = pick(p.ranks);
    f.src_host = "h" + std::to_string(pick(1000)), f.dst_host = "h" + std::to_string(pick(1000));
    if (pick(2)) f.src_nic = "nic" + std::to_string(pick(8));
    if (pick(2)) f.dst_nic = "nic" + std::to_string(pick(8));
    f.protocol = pick(2) ? "udp" : "tcp";
    f.sport = static_cast<uint16_t>(1 + pick(65535)), f.dport = static_cast<uint16_t>(1 + pick(65535));
    for (int k = pick(6); k > 0; --k) f.path.push_back("sw" + std::to_string(pick(300)));
    for (int k = pick(4); k > 0; --k) f.steps.push_back(pick(40));
    if (pick(3) == 0) {
      for (size_t k = 0; k < f.steps.size(); ++k) f.rounds.push_back(pick(3));
    }
    if (pick(4) == 0) f.src_addr = "10.0." + std::to_string(pick(256)) + ".1", f.dst_addr = "10.1.0." + std::to_string(pick(256));
    if (pick(4) == 0) f.conn = pick(5);
    if (pick(4) == 0) f.qp = pick(5);
    if (pick(4) == 0) f.dqpn = static_cast<uint32_t>(2 + pick(0xFFFFFD));
    p.flows.push_back(std::move(f));
  }
  for (int s = pick(7); s > 0; --s) p.steps.push_back({pick(40), pick(2) ? "rs" : "ag", pick(9), pick(9), 1 + pick(4)});
  EXPECT_EQ(plan_to_json(p), tree_dump(p));
}

INSTANTIATE_TEST_SUITE_P(Seeds, PlanJsonRandom, ::testing::Range(1, 41));

}  // namespace
}  // namespace weft::routing
