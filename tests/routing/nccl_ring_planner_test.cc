// nccl-ring plans (nccl_ring_schedule.cc) over random 2-tier Clos fabrics:
// C in {1, 2, 4, 8} channels x Q in {1, 2, 4} QPs per connection, random
// partial allocations, some with failed spine-leaf links or fewer spines
// than hosts per leaf. The judge is the link-load checker over paths
// recomputed by hashing the planned ports in a fresh model table.
//
//  1. Every step at the checker's bound, counted over the whole link
//     (max_load == lower_bound: C x Q QPs on each access link) and over the
//     switch-to-switch links alone (max_fabric_load == fabric_lower_bound:
//     one QP per spine link where the leaf has the uplinks), in >= 99% of
//     steps; the misses are printed.
//  2. The plan is what the NCCL plugin looks up: exactly P x C x Q udp flows
//     to 4791, found by RoutePlan::find_qp for every (NIC addresses,
//     channel, QP), each source port used once per host, no rounds.
//  3. Small cases against brute force over every spine of every cross-leaf
//     QP flow: the plan's switch-link load is the optimum.
// The 4,096-endpoint cases (label perf): nccl_ring_planner_large_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>
#include <tuple>

#include "nccl_ring_cases.h"

namespace weft::routing {
namespace {

// 1..3 random spine-leaf links go down.
void fail_random_links(topo::Fabric& f, std::mt19937& rng) {
  std::vector<size_t> fabric;
  for (size_t l = 0; l < f.links.size(); ++l) {
    if (f.is_switch_vertex(f.links[l].a) && f.is_switch_vertex(f.links[l].b)) fabric.push_back(l);
  }
  std::shuffle(fabric.begin(), fabric.end(), rng);
  const size_t n = std::uniform_int_distribution<size_t>(1, 3)(rng);
  for (size_t k = 0; k < n && k < fabric.size(); ++k) f.links[fabric[k]].state = topo::LinkState::kDown;
}

// A scheduler's partial allocation: a random share of the NICs, ranked by
// weft (leaf sets) or left in the scheduler's order.
ranking::RankOrder random_allocation(const topo::Fabric& f, std::mt19937& rng, bool ranked) {
  auto all = ranking::allocation_all(f);
  std::shuffle(all.begin(), all.end(), rng);
  const size_t keep = std::uniform_int_distribution<size_t>(std::min<size_t>(2, all.size()), all.size())(rng);
  all.resize(keep);
  if (!ranked) return ranking::RankOrder{all};
  return ranking::rank(f, all, ranking::RankAlgo::kClos).value();
}

// Property 2: what the plugin finds in the plan.
void expect_plugin_finds_every_qp(const topo::Fabric& f, const ranking::RankOrder& order, const Shape& shape,
                                  const RoutePlan& plan) {
  const int P = order.size();
  ASSERT_EQ(plan.flows.size(), static_cast<size_t>(P < 2 ? 0 : P * shape.channels * shape.qps));
  ASSERT_EQ(plan.collective, "nccl-ring");
  std::set<std::pair<std::string, uint16_t>> host_ports;
  for (const PlanFlow& fl : plan.flows) {
    EXPECT_EQ(fl.protocol, "udp");
    EXPECT_EQ(fl.dport, kRoceV2Port);
    EXPECT_TRUE(fl.rounds.empty()) << "nccl-ring plans have no rounds";
    EXPECT_EQ(fl.steps, (std::vector<int>{0, 1}));
    ASSERT_TRUE(host_ports.emplace(fl.src_host, fl.sport).second)
        << "source port " << fl.sport << " used twice on " << fl.src_host;
  }
  for (int r = 0; P >= 2 && r < P; ++r) {
    const auto& a = f.nics[static_cast<size_t>(order.nics[static_cast<size_t>(r)])].address;
    const auto& b = f.nics[static_cast<size_t>(order.nics[static_cast<size_t>((r + 1) % P)])].address;
    for (int c = 0; c < shape.channels; ++c) {
      for (int q = 0; q < shape.qps; ++q) {
        const PlanFlow* fl = plan.find_qp(a, b, c, q);
        ASSERT_NE(fl, nullptr) << a << " -> " << b << " conn " << c << " qp " << q;
        EXPECT_EQ(fl->src_rank, r);
        EXPECT_EQ(fl->dst_rank, (r + 1) % P);
      }
    }
  }
}

class NcclRingPlanner : public ::testing::TestWithParam<Shape> {};

TEST_P(NcclRingPlanner, RandomPartialAllocationsReachTheCheckersBound) {
  const Shape shape = GetParam();
  std::mt19937 rng(4100u + static_cast<uint32_t>(shape.channels * 16 + shape.qps));
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  constexpr int kCases = 100;
  int steps = 0, at_bound = 0, at_fabric_bound = 0, unroutable = 0;
  for (int c = 0; c < kCases; ++c) {
    // A third each: non-blocking, failed links, fewer spines than hosts.
    const int kind = c % 3;
    const int hosts = uni(2, 8), leaves = uni(2, 8);
    const int spines = kind == 2 ? uni(1, hosts - 1) : hosts + uni(0, 2);
    auto f = topo::build_clos2({.spines = spines, .leaves = leaves, .hosts_per_leaf = hosts}).value();
    if (kind == 1) fail_random_links(f, rng);
    ASSERT_TRUE(f.finalize());
    give_addresses(f);
    const auto order = random_allocation(f, rng, c % 2 == 0);
    auto j = plan_and_judge(f, order, shape, static_cast<uint32_t>(c + 1));
    if (!j) {
      // Only a partitioned fabric may refuse: two leaves that share no spine.
      ASSERT_EQ(j.status().code(), StatusCode::kUnavailable) << j.status().message();
      ++unroutable;
      continue;
    }
    expect_plugin_finds_every_qp(f, order, shape, j->plan);
    ASSERT_EQ(j->rep.steps.size(), 2u);
    for (const StepLoad& sl : j->rep.steps) {
      ++steps;
      ASSERT_EQ(sl.flows, order.size() * shape.channels * shape.qps);
      ASSERT_EQ(sl.rounds, 1);
      ASSERT_GE(sl.lower_bound, shape.channels * shape.qps) << "every NIC sends C x Q QPs";
      ASSERT_GE(sl.max_load, sl.lower_bound);
      ASSERT_GE(sl.max_fabric_load, sl.fabric_lower_bound);
      at_bound += sl.max_load == sl.lower_bound;
      at_fabric_bound += sl.max_fabric_load == sl.fabric_lower_bound;
      if (sl.max_fabric_load != sl.fabric_lower_bound) {
        std::printf("case %d step %d: S=%d L=%d H=%d kind %d, %d ranks: switch-link load %d, its bound %d\n", c,
                    sl.step, spines, leaves, hosts, kind, order.size(), sl.max_fabric_load, sl.fabric_lower_bound);
      }
    }
  }
  std::printf("C=%d Q=%d: %d steps, %d at the checker's bound, %d at its switch-link bound, %d cases unroutable\n",
              shape.channels, shape.qps, steps, at_bound, at_fabric_bound, unroutable);
  EXPECT_LE(unroutable, kCases / 10);
  EXPECT_GE(at_bound * 100, steps * 99);
  EXPECT_GE(at_fabric_bound * 100, steps * 99);
}

INSTANTIATE_TEST_SUITE_P(Shapes, NcclRingPlanner, ::testing::ValuesIn(all_shapes()), shape_name);

// Property 3: the least possible max switch-link load of one step, by trying
// every spine for every cross-leaf flow over links that are up.
int brute_force_fabric_load(const topo::Fabric& f, const ranking::RankOrder& order, const Step& st) {
  std::vector<int> spines;
  for (size_t s = 0; s < f.switches.size(); ++s) {
    if (f.switches[s].tier == topo::kTierSpine) spines.push_back(static_cast<int>(s));
  }
  auto up = [&](int leaf, int spine) {
    auto l = f.link_between(f.switch_vertex(leaf), f.switch_vertex(spine));
    return l && f.links[*l].state == topo::LinkState::kUp;
  };
  std::vector<std::pair<int, int>> cross;  // (source leaf, destination leaf)
  for (const Flow& fl : st.flows) {
    const int a = f.nic_switch(order.nics[static_cast<size_t>(fl.src)]);
    const int b = f.nic_switch(order.nics[static_cast<size_t>(fl.dst)]);
    if (a != b) cross.emplace_back(a, b);
  }
  const size_t S = spines.size(), n = f.switches.size();
  int best = 1 << 30;
  std::vector<size_t> pick(cross.size(), 0);
  std::vector<int> upload(n * S), download(n * S);
  for (;;) {
    std::fill(upload.begin(), upload.end(), 0);
    std::fill(download.begin(), download.end(), 0);
    int worst = 0;
    bool ok = true;
    for (size_t i = 0; i < cross.size() && ok; ++i) {
      const int sp = spines[pick[i]];
      ok = up(cross[i].first, sp) && up(cross[i].second, sp);
      worst = std::max({worst, ++upload[static_cast<size_t>(cross[i].first) * S + pick[i]],
                        ++download[static_cast<size_t>(cross[i].second) * S + pick[i]]});
    }
    if (ok) best = std::min(best, worst);
    size_t k = 0;
    while (k < pick.size() && ++pick[k] == S) pick[k++] = 0;
    if (k == pick.size()) break;
  }
  return cross.empty() ? 0 : best;
}

TEST(NcclRingPlannerSmall, SwitchLinkLoadIsTheBruteForceOptimum) {
  std::mt19937 rng(5200u);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int judged = 0, cross_flows = 0;
  for (int c = 0; c < 60; ++c) {
    const Shape shape{uni(1, 2), uni(1, 2)};
    const int hosts = uni(1, 3), leaves = uni(2, 3), spines = uni(1, 3);
    auto f = topo::build_clos2({.spines = spines, .leaves = leaves, .hosts_per_leaf = hosts}).value();
    if (c % 2) fail_random_links(f, rng);
    ASSERT_TRUE(f.finalize());
    give_addresses(f);
    auto order = random_allocation(f, rng, false);
    if (order.size() > 3) order.nics.resize(3);
    auto s = build_schedule(Collective::kNcclRing, order.size(), 64, 4, {shape.channels, shape.qps}).value();
    int cross = 0;
    for (const Flow& fl : s.steps[0].flows) {
      cross += f.nic_switch(order.nics[static_cast<size_t>(fl.src)]) != f.nic_switch(order.nics[static_cast<size_t>(fl.dst)]);
    }
    if (cross > 9) continue;  // 3^9 assignments at most
    auto j = plan_and_judge(f, order, shape, static_cast<uint32_t>(c + 1));
    const int best = brute_force_fabric_load(f, order, s.steps[0]);
    if (!j) {
      ASSERT_EQ(best, 1 << 30) << "refused although every flow has a live spine: " << j.status().message();
      continue;
    }
    ++judged;
    cross_flows += cross;
    for (const StepLoad& sl : j->rep.steps) {
      ASSERT_EQ(sl.max_fabric_load, best) << "case " << c << ": S=" << spines << " L=" << leaves << " H=" << hosts
                                          << " C=" << shape.channels << " Q=" << shape.qps;
    }
  }
  std::printf("%d cases judged against brute force, %d cross-leaf QP flows\n", judged, cross_flows);
  EXPECT_GE(judged, 40);
  EXPECT_GE(cross_flows, 100);
}

TEST(NcclRingPlannerInput, RefusesTwoRanksOnOneHostAndTcp) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 2, .nics_per_host = 2}).value();
  give_addresses(f);
  const auto all = ranking::allocation_all(f);
  const ranking::RankOrder order{all};
  auto s = build_schedule(Collective::kNcclRing, order.size(), 64, 4, {2, 2}).value();
  auto table = make_model_path_table(f, make_hash("crc32", 1).value(), 1);
  auto two = plan_routes(f, order, s, *table, {});
  ASSERT_FALSE(two);
  EXPECT_EQ(two.status().message(),
            fmt::format("nccl-ring needs one rank per host: ranks 0 and 1 both run on '{}' (NCCL joins the GPUs of one "
                        "host inside it; rank each host's NIC once)",
                        f.hosts[static_cast<size_t>(f.nics[static_cast<size_t>(all[0])].host)].name));
  // One NIC of each host: accepted, but not over TCP.
  std::vector<int> firsts;
  for (int n : all) {
    if (f.nics[static_cast<size_t>(n)].name == f.nics[static_cast<size_t>(all[0])].name) firsts.push_back(n);
  }
  const ranking::RankOrder one{firsts};
  auto s1 = build_schedule(Collective::kNcclRing, one.size(), 64, 4, {2, 2}).value();
  PlannerOptions opt;
  EXPECT_TRUE(plan_routes(f, one, s1, *table, opt));
  opt.protocol = "tcp";
  auto tcp = plan_routes(f, one, s1, *table, opt);
  ASSERT_FALSE(tcp);
  EXPECT_EQ(tcp.status().message(), "nccl-ring plans RoCE v2 QPs: protocol 'tcp' must be udp");
}

}  // namespace
}  // namespace weft::routing
