// The planner's acceptance properties over thousands of random cases. The
// judge is always the link-load checker over paths recomputed by hashing the
// planned ports in a fresh model table, never the planner's own count.
//
//  1. Non-blocking 2-tier Clos (S >= H), random permutation steps: load 1,
//     every time (1000 cases).
//  2. Failed spine-leaf links or S < H: max load equals the lower bound of
//     the issue — max over leaves and directions of ceil(flows / usable
//     uplinks), computed here — in >= 99% of 1000 cases; the rest are
//     printed beside the checker's bound, which also counts, per pair of
//     leaves, ceil(flows between them / spines both still reach) and so shows
//     when the leaf bound cannot be met by any routing.
//  3. 64 source ports per pair through the hash model: a port exists for the
//     spine an exact König colouring picks for >= 99.9% of flows (the rate is
//     printed), and the planner gives every flow a port on its planned spine.
//  4. Rounds: on random Clos fabrics with failed links, HD and random
//     permutation steps split into rounds have max load 1 on every switch
//     link in every round, whenever every flow has a live path (300 cases);
//     how often the round colouring (König where the conflicts are
//     bipartite, first-fit otherwise) needed more rounds than one round's bound is
//     printed.
// Property 1 runs in 4 shards so ctest spreads it over the cores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "weft/routing/link_load.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

constexpr int kShards = 4;
constexpr int kCasesPerShard = 250;

// One step: every rank sends to pi(rank), pi a random permutation with its
// fixed points dropped (and not the identity).
Schedule permutation_step(int ranks, std::mt19937& rng) {
  std::vector<int> pi(static_cast<size_t>(ranks));
  for (int i = 0; i < ranks; ++i) pi[static_cast<size_t>(i)] = i;
  do {
    std::shuffle(pi.begin(), pi.end(), rng);
  } while (ranks > 1 && std::is_sorted(pi.begin(), pi.end()));
  Schedule s{Collective::kAllreduceHd, ranks, 256, 4, {}};
  Step st{"perm", 1, 1, {}};
  for (int r = 0; r < ranks; ++r) {
    if (pi[static_cast<size_t>(r)] != r) st.flows.push_back({r, pi[static_cast<size_t>(r)], 1024});
  }
  s.steps.push_back(std::move(st));
  return s;
}

struct Judged {
  int max_load = 0;
  int lower_bound = 0;  // the checker's
};

Result<Judged> plan_and_judge(const topo::Fabric& f, const ranking::RankOrder& order, const Schedule& s,
                              const char* hash, uint32_t seed) {
  auto table = make_model_path_table(f, make_hash(hash, seed).value(), seed);
  PlannerOptions opt;
  WEFT_ASSIGN_OR_RETURN(auto planned, plan_routes(f, order, s, *table, opt));
  auto fresh = make_model_path_table(f, make_hash(hash, seed).value(), seed);
  WEFT_ASSIGN_OR_RETURN(auto router, make_table_router(f, order, planned.plan, *fresh));
  WEFT_ASSIGN_OR_RETURN(auto rep, check_link_load(f, order, s, *router));
  return Judged{rep.max_load, rep.max_lower_bound};
}

// The bound: max over leaves and directions of ceil(flows / usable
// uplinks), and 1 for any flow at all (its access links).
int leaf_bound(const topo::Fabric& f, const ranking::RankOrder& order, const Step& st) {
  std::vector<int> up(f.switches.size(), 0), down(f.switches.size(), 0);
  int lb = st.flows.empty() ? 0 : 1;
  for (const Flow& fl : st.flows) {
    const int a = f.nic_switch(order.nics[static_cast<size_t>(fl.src)]);
    const int b = f.nic_switch(order.nics[static_cast<size_t>(fl.dst)]);
    if (a != b) ++up[static_cast<size_t>(a)], ++down[static_cast<size_t>(b)];
  }
  for (size_t sw = 0; sw < f.switches.size(); ++sw) {
    int links = 0;
    for (const auto& a : f.switch_neighbours(static_cast<int>(sw))) {
      links += f.links[static_cast<size_t>(a.link)].state == topo::LinkState::kUp;
    }
    if (f.switches[sw].tier != topo::kTierLeaf || links == 0) continue;
    lb = std::max({lb, (up[sw] + links - 1) / links, (down[sw] + links - 1) / links});
  }
  return lb;
}

ranking::RankOrder random_order(const topo::Fabric& f, std::mt19937& rng) {
  auto alloc = ranking::allocation_all(f);
  std::shuffle(alloc.begin(), alloc.end(), rng);
  return ranking::RankOrder{alloc};
}

// 1..3 random spine-leaf links go down.
void fail_random_links(topo::Fabric& f, std::mt19937& rng) {
  std::vector<int> fabric;
  for (size_t l = 0; l < f.links.size(); ++l) {
    if (f.is_switch_vertex(f.links[l].a) && f.is_switch_vertex(f.links[l].b)) fabric.push_back(static_cast<int>(l));
  }
  std::shuffle(fabric.begin(), fabric.end(), rng);
  for (int k = 0, n = std::uniform_int_distribution<int>(1, 3)(rng); k < n && k < static_cast<int>(fabric.size()); ++k) {
    f.links[static_cast<size_t>(fabric[static_cast<size_t>(k)])].state = topo::LinkState::kDown;
  }
}

class NonBlocking : public ::testing::TestWithParam<int> {};

TEST_P(NonBlocking, RandomPermutationStepsGetLoadOne) {
  std::mt19937 rng(9100u + static_cast<uint32_t>(GetParam()));
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int c = 0; c < kCasesPerShard; ++c) {
    const int hosts = uni(1, 10), spines = hosts + uni(0, 3), leaves = uni(2, 9);
    auto f = topo::build_clos2({.spines = spines, .leaves = leaves, .hosts_per_leaf = hosts}).value();
    auto order = random_order(f, rng);
    auto s = permutation_step(order.size(), rng);
    const char* hash = c % 2 ? "crc32" : "linux-l4";
    auto j = plan_and_judge(f, order, s, hash, static_cast<uint32_t>(c + 1));
    ASSERT_TRUE(j) << j.status().message();
    ASSERT_EQ(j->max_load, 1) << "case " << c << ": S=" << spines << " L=" << leaves << " H=" << hosts << " " << hash;
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, NonBlocking, ::testing::Range(0, kShards));

TEST(Constrained, FailedLinksOrFewSpinesReachTheLowerBound) {
  std::mt19937 rng(7300u);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int at_bound = 0, at_checker_bound = 0, judged = 0;
  const int cases = kShards * kCasesPerShard;
  for (int c = 0; c < cases; ++c) {
    const bool fail_links = c % 2 == 0;
    const int hosts = uni(2, 10), leaves = uni(2, 8);
    const int spines = fail_links ? hosts + uni(0, 2) : uni(1, hosts - 1);
    auto f = topo::build_clos2({.spines = spines, .leaves = leaves, .hosts_per_leaf = hosts}).value();
    if (fail_links) fail_random_links(f, rng);
    auto order = random_order(f, rng);
    auto s = permutation_step(order.size(), rng);
    auto j = plan_and_judge(f, order, s, "crc32", static_cast<uint32_t>(c + 1));
    if (!j) {
      // Only a partitioned fabric may refuse: two leaves that share no spine.
      ASSERT_EQ(j.status().code(), StatusCode::kUnavailable) << j.status().message();
      std::printf("case %d: not routable (%s)\n", c, j.status().message().c_str());
      continue;
    }
    ++judged;
    const int lb = leaf_bound(f, order, s.steps[0]);
    ASSERT_GE(j->lower_bound, lb) << "the checker's bound includes the leaf bound";
    ASSERT_GE(j->max_load, j->lower_bound) << "case " << c;
    at_checker_bound += j->max_load == j->lower_bound;
    if (j->max_load == lb) {
      ++at_bound;
    } else {
      std::printf("case %d: S=%d L=%d H=%d %s: max load %d, leaf bound %d, checker's bound %d\n", c, spines, leaves,
                  hosts, fail_links ? "failed links" : "S < H", j->max_load, lb, j->lower_bound);
    }
  }
  std::printf("at the leaf bound: %d of %d routable cases (%.2f%%); at the checker's bound: %d\n", at_bound, judged,
              100.0 * at_bound / judged, at_checker_bound);
  EXPECT_GE(judged, cases * 98 / 100);
  EXPECT_GE(at_bound * 100, judged * 99);
}

TEST(Rounds, FailedLinkFabricsHaveLoadOnePerRoundOnSwitchLinks) {
  std::mt19937 rng(6100u);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int judged = 0, split = 0, above = 0;
  for (int c = 0; c < 300; ++c) {
    const int hosts = uni(2, 8), leaves = uni(2, 6), spines = hosts + uni(-1, 1);
    auto f = topo::build_clos2({.spines = std::max(spines, 1), .leaves = leaves, .hosts_per_leaf = hosts}).value();
    fail_random_links(f, rng);
    ASSERT_TRUE(f.finalize());
    auto order = c % 2 ? random_order(f, rng) : ranking::rank(f, random_order(f, rng).nics, ranking::RankAlgo::kClos).value();
    auto s = c % 3 == 0 ? permutation_step(order.size(), rng)
                        : build_schedule(Collective::kAllreduceHd, order.size(), 4096).value();
    const auto seed = static_cast<uint32_t>(c + 1);
    auto table = make_model_path_table(f, make_hash("crc32", seed).value(), seed);
    auto planned = plan_routes(f, order, s, *table, {});
    if (!planned) {  // some flow has no live path: two leaves share no live spine
      ASSERT_EQ(planned.status().code(), StatusCode::kUnavailable) << planned.status().message();
      continue;
    }
    ++judged;
    auto fresh = make_model_path_table(f, make_hash("crc32", seed).value(), seed);
    auto router = make_table_router(f, order, planned->plan, *fresh).value();
    ASSERT_TRUE(apply_plan_rounds(planned->plan, s));
    auto rep = check_link_load(f, order, s, *router).value();
    for (const auto& sl : rep.steps) {
      ASSERT_LE(sl.max_fabric_load, 1) << "case " << c << " step " << sl.step << ": S=" << spines << " L=" << leaves
                                        << " H=" << hosts;
      ASSERT_EQ(sl.rounds, planned->plan.steps[static_cast<size_t>(sl.step)].rounds);
      split += sl.rounds > 1;
      above += sl.rounds > sl.single_round_bound;
    }
  }
  std::printf("rounds: %d of 300 cases routable; %d steps split, %d of them into more rounds than one round's bound\n",
              judged, split, above);
  EXPECT_GE(judged, 250);
  EXPECT_GT(split, 0);
}

TEST(PortCoverage, SixtyFourPortsPerPairReachTheChosenSpine) {
  std::mt19937 rng(5100u);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  long flows = 0, covered = 0, planned_flows = 0, on_spine = 0;
  PairRoutes pr;
  for (int c = 0; c < kShards * kCasesPerShard / 5; ++c) {
    const int hosts = uni(2, 8), spines = uni(hosts, 8), leaves = uni(2, 8);
    auto f = topo::build_clos2({.spines = spines, .leaves = leaves, .hosts_per_leaf = hosts}).value();
    auto order = ranking::rank(f, random_order(f, rng).nics, ranking::RankAlgo::kClos).value();
    auto s = build_schedule(Collective::kAllreduceHd, order.size(), 4096).value();
    auto table = make_model_path_table(f, make_hash("crc32", static_cast<uint32_t>(c + 1)).value());
    // The spine an unconstrained exact colouring (the ideal router) picks.
    auto ideal = make_ideal_router(f, order);
    auto rep = check_link_load(f, order, s, *ideal, {.keep_paths = true}).value();
    for (size_t si = 0; si < s.steps.size(); ++si) {
      for (size_t i = 0; i < s.steps[si].flows.size(); ++i) {
        const auto sw = path_switches(f, rep.steps[si].paths[i]);
        if (sw.size() != 3) continue;
        const Flow& fl = s.steps[si].flows[i];
        ASSERT_TRUE(table->ports({order.nics[static_cast<size_t>(fl.src)], order.nics[static_cast<size_t>(fl.dst)],
                                  kProtoUdp, kRoceV2Port}, PortRange{}, 64, pr));
        ++flows;
        bool hit = false;
        for (const auto& p : pr.ports) hit = hit || pr.route(static_cast<size_t>(p.route))[1] == sw[1];
        covered += hit;
      }
    }
    // The planner: every fabric flow's port lands on its planned spine.
    auto planned = plan_routes(f, order, s, *table, {}).value();
    for (const auto& fl : planned.plan.flows) {
      if (fl.path.size() != 3) continue;
      ++planned_flows;
      auto r = table->route({order.nics[static_cast<size_t>(fl.src_rank)], order.nics[static_cast<size_t>(fl.dst_rank)],
                             kProtoUdp, fl.sport, fl.dport}).value();
      on_spine += f.switches[static_cast<size_t>(r[1])].name == fl.path[1];
    }
    EXPECT_EQ(planned.stats.max_load, planned.stats.max_lower_bound) << "case " << c;
  }
  std::printf("a port exists for the König spine: %ld of %ld flows (%.3f%%); planned ports on their spine: %ld of %ld\n",
              covered, flows, 100.0 * static_cast<double>(covered) / static_cast<double>(flows), on_spine, planned_flows);
  EXPECT_GE(static_cast<double>(covered), 0.999 * static_cast<double>(flows));
  EXPECT_EQ(on_spine, planned_flows);
}


}  // namespace
}  // namespace weft::routing
