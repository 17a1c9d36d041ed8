// Hybrid allreduce planned on a 16,384-GPU rail-optimised dual-plane fabric:
// 2,048 hosts x 8 NICs (8 rails of 32 leaves, 64 hosts each), every NIC with
// a port on each of 2 planes of 64 spines (routing/weft/routing/planes.h), so
// 32,768 ranks, one per NIC port, in the rail order.
//
// Verified before anything is reported (the benchmark stops with an error
// otherwise, and ctest fails on it): every step's max load — counted by the
// link-load checker over the paths the planned ports hash to in a fresh
// model table — equals the checker's lower bound, no flow crosses planes,
// planning takes at most 32 x the CPU time of that check in the same run
// (an absolute bound follows the machine's speed, not the planner's:
// bench/results), and the simulated planned busbw is >= 0.95 x
// that of an ideal non-blocking switch. ECMP (one seed, same rank order) is
// simulated and reported beside them.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include "bench_clock.h"
#include "weft/ranking/rank_order.h"
#include "weft/routing/hybrid_schedule.h"
#include "weft/routing/link_load.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/routing/simulator.h"
#include "weft/topology/builders.h"

namespace {

using namespace weft;
using bench::cpu_seconds;

constexpr uint64_t kBytes = 64u << 20;  // per rank
// Planning's CPU time against the link-load check of the same flows in the
// same run (a baseline that runs as fast or slow as the machine does).
constexpr double kMaxPlanVsCheck = 32;
constexpr double kMinBusbwVsIdeal = 0.95;

std::string verify(const topo::Fabric& f, const ranking::RankOrder& order, const routing::Schedule& s,
                   routing::Router& router) {
  auto rep = routing::check_link_load(f, order, s, router);
  if (!rep) return std::string(rep.status().message());
  if (rep->cross_plane_flows != 0) return std::to_string(rep->cross_plane_flows) + " flows cross planes";
  for (const auto& st : rep->steps) {
    if (st.max_load != st.lower_bound) {
      return "step " + std::to_string(st.step) + ": max load " + std::to_string(st.max_load) + " above the bound " +
             std::to_string(st.lower_bound);
    }
  }
  return "";
}

Result<double> busbw(const topo::Fabric& f, const ranking::RankOrder& order, const routing::Schedule& s,
                     double intra_s, routing::Router& router) {
  WEFT_ASSIGN_OR_RETURN(auto r, routing::simulate(f, order, s, router));
  return routing::allreduce_busbw(kBytes, order.size(), r.seconds + intra_s);
}

void BM_PlanHybridRailDualPlane16384Gpus(benchmark::State& state) {
  auto f = topo::build_rail({.hosts = 2048, .nics_per_host = 8, .leaves_per_rail = 32, .spines = 64, .planes = 2});
  if (!f) return state.SkipWithError(std::string(f.status().message()).c_str());
  auto order = ranking::rank(*f, ranking::allocation_all(*f), ranking::RankAlgo::kRail);
  if (!order) return state.SkipWithError(std::string(order.status().message()).c_str());
  auto hybrid = routing::build_hybrid_schedule(*f, *order, kBytes / 4, 4);
  if (!hybrid) return state.SkipWithError(std::string(hybrid.status().message()).c_str());
  const routing::Schedule& s = hybrid->inter_host;
  const double intra_s = 2.0 * static_cast<double>(hybrid->intra_bytes) / (1600e9 / 8);  // NVLink-class, as weft sim
  double plan_cpu = 0, plan_wall = 0, check_cpu = 0, planned_bw = 0, ideal_bw = 0, ecmp_bw = 0;
  int steps = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    auto table = routing::make_model_path_table(*f, *routing::make_hash("crc32", 1));
    auto planned = routing::plan_routes(*f, *order, s, *table, {});
    plan_cpu = cpu_seconds() - c0;
    plan_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!planned) return state.SkipWithError(std::string(planned.status().message()).c_str());
    if (planned->plan.collective != "allreduce-hybrid") return state.SkipWithError("the plan is not allreduce-hybrid");
    auto fresh = routing::make_model_path_table(*f, *routing::make_hash("crc32", 1));
    auto replay = routing::make_table_router(*f, *order, planned->plan, *fresh);
    if (!replay) return state.SkipWithError(std::string(replay.status().message()).c_str());
    const double v0 = cpu_seconds();
    if (auto why = verify(*f, *order, s, **replay); !why.empty()) return state.SkipWithError(why.c_str());
    check_cpu = cpu_seconds() - v0;
    auto crossbar = routing::make_crossbar_router(*f, *order);
    auto ecmp = routing::make_ecmp_router(*f, *order, {.seed = 1}).value();
    auto p = busbw(*f, *order, s, intra_s, **replay);
    auto i = busbw(*f, *order, s, intra_s, *crossbar);
    auto e = busbw(*f, *order, s, intra_s, *ecmp);
    if (!p || !i || !e) return state.SkipWithError("simulation failed");
    planned_bw = *p, ideal_bw = *i, ecmp_bw = *e;
    steps = planned->stats.steps_at_bound;
  }
  state.counters["plan_cpu_s"] = plan_cpu;
  state.counters["plan_s"] = plan_wall;
  state.counters["check_cpu_s"] = check_cpu;
  state.counters["plan_vs_check"] = plan_cpu / check_cpu;
  state.counters["steps_at_bound"] = steps;
  state.counters["busbw_planned_GBps"] = planned_bw / 1e9;
  state.counters["busbw_ecmp_GBps"] = ecmp_bw / 1e9;
  state.counters["busbw_ideal_GBps"] = ideal_bw / 1e9;
  state.counters["planned_vs_ideal"] = planned_bw / ideal_bw;
  state.counters["ecmp_vs_ideal"] = ecmp_bw / ideal_bw;
  if (plan_cpu > kMaxPlanVsCheck * check_cpu) {
    return state.SkipWithError(("planning took " + std::to_string(plan_cpu) + " s of CPU, " +
                                std::to_string(plan_cpu / check_cpu) + " x the link-load check (limit 32 x)")
                                   .c_str());
  }
  if (planned_bw < kMinBusbwVsIdeal * ideal_bw) {
    return state.SkipWithError(("planned busbw is " + std::to_string(planned_bw / ideal_bw) + " x ideal (< 0.95)").c_str());
  }
}
BENCHMARK(BM_PlanHybridRailDualPlane16384Gpus)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
