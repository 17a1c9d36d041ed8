// Route planning on a 3-tier Clos at 65,536 endpoints (routing/clos3_coloring.h)
// and simulating the plan, against the 2-tier planner at the same endpoint
// count measured in the same run (a ratio: absolute times on a shared
// machine are noise).
//
// The 3-tier fabric: 32 pods x 16 leaves x 128 hosts, 16 aggregation
// switches per pod, 256 cores in 16 planes (8:1 at the leaves, 1:1 above).
// The baseline: 2-tier, 64 spines x 1024 leaves x 64 hosts. Both run HD
// allreduce on contiguous leaf sets of a shuffled full allocation. The
// 3-tier plan is also made on one thread (PlannerOptions::second_thread
// off): plan3_vs_one_thread is the wall-clock ratio of the default to it,
// and the two plans must be equal.
//
// Verified before anything is reported (the benchmark stops with an error
// otherwise, and ctest fails on it):
//  - BM_Plan3TierVs2Tier (hash seed 1, rounds on): every step's max load —
//    counted by the link-load checker over the paths the planned ports hash
//    to in a fresh model table — is 1 per round, and no step takes more
//    rounds than its single-round bound;
//  - BM_Plan3TierSeeds (hash seeds 1-5, rounds off): every step's max load
//    equals its lower bound: the checker's, or where the plan is above it,
//    the bound of routing/clos3_bound.h over the ports the table offers
//    (which proves that no choice of those ports does better).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>

#include "bench_clock.h"
#include "weft/ranking/rank_order.h"
#include "weft/routing/clos3_bound.h"
#include "weft/routing/link_load.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/routing/simulator.h"
#include "weft/topology/builders.h"

namespace {

using namespace weft;
using bench::cpu_seconds;
using bench::peak_rss_mib;

const topo::Fabric& clos3() {
  static topo::Fabric f = *topo::build_clos3(
      {.pods = 32, .leaves_per_pod = 16, .aggs_per_pod = 16, .cores = 256, .hosts_per_leaf = 128});
  return f;
}

const topo::Fabric& clos2() {
  static topo::Fabric f = *topo::build_clos2({.spines = 64, .leaves = 1024, .hosts_per_leaf = 64});
  return f;
}

ranking::RankOrder leaf_sets(const topo::Fabric& f) {
  auto alloc = ranking::allocation_all(f);
  std::shuffle(alloc.begin(), alloc.end(), std::mt19937(42));
  return *ranking::rank(f, alloc, ranking::RankAlgo::kClos);
}

struct Timed {
  routing::PlannedRoutes planned;
  double cpu_s = 0, wall_s = 0;
};

Result<Timed> plan_timed(const topo::Fabric& f, const ranking::RankOrder& order, const routing::Schedule& s,
                         const routing::PlannerOptions& opt, uint32_t seed = 1) {
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  auto table = routing::make_model_path_table(f, *routing::make_hash("crc32", seed));
  WEFT_ASSIGN_OR_RETURN(auto planned, routing::plan_routes(f, order, s, *table, opt));
  return Timed{std::move(planned), cpu_seconds() - c0,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

// Step si's lower bound over the ports the table offers (clos3_bound.h),
// from the checker's bound `from`.
int reach_bound(const topo::Fabric& f, const ranking::RankOrder& order, const routing::Step& st,
                routing::PathTable& table, int from) {
  static const auto shape = *routing::Clos3Shape::of(clos3());
  std::vector<routing::Clos3Flow> flows;
  std::vector<routing::Clos3Key> keys;
  routing::PairRoutes pr;
  for (const auto& fl : st.flows) {
    const int s = order.nics[static_cast<size_t>(fl.src)], d = order.nics[static_cast<size_t>(fl.dst)];
    if (f.nic_switch(s) == f.nic_switch(d)) continue;
    if (!table.ports({s, d}, routing::PortRange{}, routing::PlannerOptions{}.ports_per_pair, pr)) return -1;
    const auto at = static_cast<uint32_t>(keys.size());
    for (const auto& p : pr.ports) {
      if (auto k = shape.key(pr.route(static_cast<size_t>(p.route)))) keys.push_back(*k);
    }
    flows.push_back({f.nic_switch(s), f.nic_switch(d), at, static_cast<uint32_t>(keys.size()) - at});
  }
  const auto b = routing::clos3_reach_bound(shape, flows, keys, from);
  if (b.witness.pod >= 0) {  // the proof, once per flow set above the checker's bound
    std::string leaves, cores;
    for (int l : b.witness.leaves) leaves.append(" ").append(f.switches[static_cast<size_t>(l)].name);
    for (int c : b.witness.cores) cores.append(" ").append(std::to_string(c));
    std::fprintf(stderr,
                 "  step %s d=%d: bound %d over the offered ports: pod %d (%s), slot %d: leaves%s reach only cores%s of "
                 "the plane, %d flows forced there > %d x %zu\n",
                 st.phase.c_str(), st.distance, b.load, b.witness.pod, b.witness.up ? "uplinks" : "downlinks",
                 b.witness.slot, leaves.c_str(), cores.c_str(), b.witness.forced, b.load - 1, b.witness.cores.size());
  }
  return b.load;
}

// Every step at its lower bound over the paths the planned ports hash to in
// a fresh table (module comment); "" or what is wrong. `reached` counts the
// steps above the checker's bound that are at clos3_bound.h's.
std::string verify(const topo::Fabric& f, const ranking::RankOrder& order, const routing::Schedule& s,
                   const routing::RoutePlan& plan, uint32_t seed = 1, int* reached = nullptr) {
  auto table = routing::make_model_path_table(f, *routing::make_hash("crc32", seed));
  auto router = routing::make_table_router(f, order, plan, *table);
  if (!router) return std::string(router.status().message());
  routing::Schedule with_rounds = s;
  if (auto st = routing::apply_plan_rounds(plan, with_rounds); !st) return std::string(st.message());
  auto rep = routing::check_link_load(f, order, with_rounds, **router);
  if (!rep) return std::string(rep.status().message());
  std::map<int, int> bound_at;  // by distance
  for (const auto& st : rep->steps) {
    if (st.rounds > st.single_round_bound) {
      return "step " + std::to_string(st.step) + ": " + std::to_string(st.rounds) + " rounds for a single-round bound of " +
             std::to_string(st.single_round_bound);
    }
    if (st.max_load == st.lower_bound) continue;
    // HD's reduce-scatter and allgather steps of one distance have one flow
    // set: its bound once.
    int& known = bound_at[st.distance];
    if (known == 0) {
      known = st.max_load > st.lower_bound && reached
                  ? reach_bound(f, order, s.steps[static_cast<size_t>(st.step)], *table, st.lower_bound)
                  : st.lower_bound;
    }
    const int bound = known;
    if (st.max_load != bound) {
      return "step " + std::to_string(st.step) + ": max load " + std::to_string(st.max_load) + " above the bound " +
             std::to_string(bound) + " (checker: " + std::to_string(st.lower_bound) + ")";
    }
    ++*reached;
  }
  return "";
}

void BM_Plan3TierVs2Tier(benchmark::State& state) {
  const auto& f3 = clos3();
  const auto& f2 = clos2();
  const auto o3 = leaf_sets(f3), o2 = leaf_sets(f2);
  const auto s3 = *routing::build_schedule(routing::Collective::kAllreduceHd, o3.size(), (64u << 20) / 4);
  const auto s2 = *routing::build_schedule(routing::Collective::kAllreduceHd, o2.size(), (64u << 20) / 4);
  double plan3_cpu = 0, plan3_wall = 0, plan3_one_wall = 0, plan2_cpu = 0, plan2_wall = 0, sim_cpu = 0, sim_wall = 0;
  int steps = 0, at_bound = 0, max_rounds = 0;
  for (auto _ : state) {
    if (auto p2 = plan_timed(f2, o2, s2, {}); p2) {
      plan2_cpu = p2->cpu_s, plan2_wall = p2->wall_s;
    } else {
      return state.SkipWithError("2-tier planning failed");
    }
    // One thread first: the default then plans with that plan still held,
    // so any cost of a fuller heap is the default's.
    routing::PlannerOptions one_thread;
    one_thread.second_thread = false;
    auto p3one = plan_timed(f3, o3, s3, one_thread);
    auto p3 = plan_timed(f3, o3, s3, {});
    if (!p3 || !p3one) return state.SkipWithError("3-tier planning failed");
    if (!(p3one->planned.plan == p3->planned.plan)) {
      return state.SkipWithError("the plan of one thread differs from the plan of two");
    }
    plan3_one_wall = p3one->wall_s;
    if (auto why = verify(f3, o3, s3, p3->planned.plan); !why.empty()) {
      return state.SkipWithError(("3-tier plan with rounds: " + why).c_str());
    }
    auto router = routing::make_plan_router(f3, o3, p3->planned.plan);
    routing::Schedule with_rounds = s3;
    if (!router || !routing::apply_plan_rounds(p3->planned.plan, with_rounds)) return state.SkipWithError("replay failed");
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    auto sim = routing::simulate(f3, o3, with_rounds, **router);
    sim_cpu = cpu_seconds() - c0;
    sim_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!sim) return state.SkipWithError(std::string(sim.status().message()).c_str());
    plan3_cpu = p3->cpu_s, plan3_wall = p3->wall_s;
    steps = p3->planned.stats.steps, at_bound = p3->planned.stats.steps_at_bound, max_rounds = p3->planned.stats.max_rounds;
  }
  state.counters["plan3_cpu_s"] = plan3_cpu;
  state.counters["plan3_s"] = plan3_wall;
  state.counters["plan3_one_thread_s"] = plan3_one_wall;
  state.counters["plan3_vs_one_thread"] = plan3_wall / plan3_one_wall;
  state.counters["plan2_cpu_s"] = plan2_cpu;
  state.counters["plan2_s"] = plan2_wall;
  state.counters["plan3_vs_plan2"] = plan3_cpu / plan2_cpu;
  state.counters["sim3_cpu_s"] = sim_cpu;
  state.counters["sim3_s"] = sim_wall;
  state.counters["steps"] = steps;
  state.counters["steps_at_bound"] = at_bound;
  state.counters["max_rounds"] = max_rounds;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}
BENCHMARK(BM_Plan3TierVs2Tier)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

// Hash seeds 1-5 without rounds: planning CPU per seed, steps at the
// checker's bound, and steps above it at clos3_bound.h's (every other step
// fails the run).
void BM_Plan3TierSeeds(benchmark::State& state) {
  const auto& f3 = clos3();
  const auto o3 = leaf_sets(f3);
  const auto s3 = *routing::build_schedule(routing::Collective::kAllreduceHd, o3.size(), (64u << 20) / 4);
  routing::PlannerOptions no_rounds;
  no_rounds.rounds = false;
  for (auto _ : state) {
    double worst_cpu = 0;
    int at_checker = 0, at_reach = 0;
    for (uint32_t seed = 1; seed <= 5; ++seed) {
      auto p = plan_timed(f3, o3, s3, no_rounds, seed);
      if (!p) return state.SkipWithError(std::string(p.status().message()).c_str());
      std::fprintf(stderr, "hash seed %u: planned in %.2f s CPU, %d of %d steps at the checker's bound\n", seed,
                   p->cpu_s, p->planned.stats.steps_at_bound, p->planned.stats.steps);
      int reached = 0;
      if (auto why = verify(f3, o3, s3, p->planned.plan, seed, &reached); !why.empty()) {
        return state.SkipWithError(("seed " + std::to_string(seed) + ": " + why).c_str());
      }
      state.counters["plan_cpu_s_seed" + std::to_string(seed)] = p->cpu_s;
      worst_cpu = std::max(worst_cpu, p->cpu_s);
      at_checker += p->planned.stats.steps_at_bound;
      at_reach += reached;
    }
    state.counters["worst_plan_cpu_s"] = worst_cpu;
    state.counters["steps_at_checker_bound"] = at_checker;
    state.counters["steps_at_reach_bound"] = at_reach;
  }
}
BENCHMARK(BM_Plan3TierSeeds)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
