// Route planning and simulation at scale (issue: plan HD allreduce for 16,384
// endpoints in <= 1 s, simulate it in <= 5 s).
//
// Fabrics: 2-tier Clos 64 spines x L leaves x 64 hosts (non-blocking, S = H),
// and a 3-tier Clos for 65,536 endpoints. Every benchmark verifies before it
// reports a time: the plan's ports are looked up again in the model path
// table and the link-load checker must see the planned max load (1 on the
// non-blocking 2-tier fabric); a simulation must finish every flow. Ratios
// are reported against a baseline measured in the same run (counters), since
// absolute times on a shared machine are noise.
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <random>

#include "bench_clock.h"
#include "weft/ranking/rank_order.h"
#include "weft/routing/link_load.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/routing/simulator.h"
#include "weft/topology/builders.h"

namespace {

using namespace weft;
using bench::cpu_seconds;
using bench::peak_rss_mib;

const topo::Fabric& clos2(int endpoints) {
  static std::map<int, topo::Fabric> cache;
  auto it = cache.find(endpoints);
  if (it == cache.end()) {
    it = cache.emplace(endpoints, *topo::build_clos2({.spines = 64, .leaves = endpoints / 64, .hosts_per_leaf = 64})).first;
  }
  return it->second;
}

// 65,536 endpoints on 3 tiers: 32 pods x 16 leaves x 128 hosts, 16
// aggregation switches per pod, 256 cores (16 planes of 16).
const topo::Fabric& clos3_65536() {
  static topo::Fabric f = *topo::build_clos3(
      {.pods = 32, .leaves_per_pod = 16, .aggs_per_pod = 16, .cores = 256, .hosts_per_leaf = 128});
  return f;
}

ranking::RankOrder leaf_sets(const topo::Fabric& f) {
  auto alloc = ranking::allocation_all(f);
  std::shuffle(alloc.begin(), alloc.end(), std::mt19937(42));
  return *ranking::rank(f, alloc, ranking::RankAlgo::kClos);
}

void BM_PlanHd(benchmark::State& state) {
  const auto& f = clos2(static_cast<int>(state.range(0)));
  const auto order = leaf_sets(f);
  const auto sched = *routing::build_schedule(routing::Collective::kAllreduceHd, order.size(), 1 << 20);
  routing::PlannerOptions opt;
  {
    auto table = routing::make_model_path_table(f, *routing::make_hash("crc32", 1));
    auto planned = routing::plan_routes(f, order, sched, *table, opt);
    if (!planned) {
      state.SkipWithError(planned.status().message().c_str());
      return;
    }
    auto replay = routing::make_table_router(f, order, planned->plan, *table);
    auto rep = replay ? routing::check_link_load(f, order, sched, **replay) : replay.status();
    if (!rep || rep->max_load != 1) {
      state.SkipWithError("the plan's ports do not give load 1 on a non-blocking fabric");
      return;
    }
  }
  for (auto _ : state) {
    auto table = routing::make_model_path_table(f, *routing::make_hash("crc32", 1));
    auto planned = routing::plan_routes(f, order, sched, *table, opt);
    benchmark::DoNotOptimize(planned);
  }
  state.counters["endpoints"] = static_cast<double>(order.size());
  state.counters["steps"] = static_cast<double>(sched.steps.size());
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}
BENCHMARK(BM_PlanHd)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond)->UseRealTime();

// Simulating HD allreduce (64 MiB per rank) on the planned ports, against
// the same simulation on an ideal crossbar: the run is verified (load 1 in
// every step, within 5% of the crossbar's time) before it is timed.
void BM_SimulateHdPlanned(benchmark::State& state) {
  const auto& f = clos2(static_cast<int>(state.range(0)));
  const auto order = leaf_sets(f);
  const auto sched = *routing::build_schedule(routing::Collective::kAllreduceHd, order.size(), (64u << 20) / 4);
  auto table = routing::make_model_path_table(f, *routing::make_hash("crc32", 1));
  auto planned = routing::plan_routes(f, order, sched, *table, {});
  if (!planned) {
    state.SkipWithError(planned.status().message().c_str());
    return;
  }
  auto router = routing::make_table_router(f, order, planned->plan, *table);
  auto crossbar = routing::make_crossbar_router(f, order);
  auto ideal = routing::simulate(f, order, sched, *crossbar);
  auto first = routing::simulate(f, order, sched, **router);
  if (!ideal || !first || first->seconds > ideal->seconds / 0.95) {
    state.SkipWithError("the planned simulation is not within 5% of the ideal switch");
    return;
  }
  for (auto _ : state) {
    auto r = routing::simulate(f, order, sched, **router);
    benchmark::DoNotOptimize(r);
  }
  state.counters["endpoints"] = static_cast<double>(order.size());
  state.counters["vs_ideal"] = ideal->seconds / first->seconds;
}
BENCHMARK(BM_SimulateHdPlanned)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same with default ECMP (random ports): flows finish at many different
// times, so the max-min rates are recomputed at every finish (events).
void BM_SimulateHdEcmp(benchmark::State& state) {
  const auto& f = clos2(static_cast<int>(state.range(0)));
  const auto order = leaf_sets(f);
  const auto sched = *routing::build_schedule(routing::Collective::kAllreduceHd, order.size(), (64u << 20) / 4);
  auto router = routing::make_ecmp_router(f, order, {.seed = 1}).value();
  auto crossbar = routing::make_crossbar_router(f, order);
  auto ideal = routing::simulate(f, order, sched, *crossbar);
  int events = 0;
  for (auto _ : state) {
    auto r = routing::simulate(f, order, sched, *router);
    if (!r || !ideal || r->seconds < ideal->seconds) {
      state.SkipWithError("ECMP beat the ideal switch: the simulator is wrong");
      return;
    }
    events = 0;
    for (const auto& st : r->steps) events += st.events;
    state.counters["vs_ideal"] = ideal->seconds / r->seconds;
  }
  state.counters["endpoints"] = static_cast<double>(order.size());
  state.counters["events"] = events;
}
BENCHMARK(BM_SimulateHdEcmp)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond)->UseRealTime();

// 3 tiers, 65,536 endpoints: plan (min-congestion assignment over each
// flow's candidate paths) and simulate. Verified before timing: the plan's
// ports hash to the plan's paths, and the planned simulation is no slower
// than default ECMP on the same ranks and no faster than the ideal switch.
void BM_PlanAndSimulate3Tier(benchmark::State& state) {
  const auto& f = clos3_65536();
  const auto order = leaf_sets(f);
  const auto sched = *routing::build_schedule(routing::Collective::kAllreduceHd, order.size(), (64u << 20) / 4);
  double plan_s = 0, sim_s = 0, plan_cpu = 0, sim_cpu = 0;
  int max_load = 0, bound = 0, solves = 0, events = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    auto table = routing::make_model_path_table(f, *routing::make_hash("crc32", 1));
    auto planned = routing::plan_routes(f, order, sched, *table, {});
    auto t1 = std::chrono::steady_clock::now();
    const double c1 = cpu_seconds();
    if (!planned) {
      state.SkipWithError(planned.status().message().c_str());
      return;
    }
    auto router = routing::make_table_router(f, order, planned->plan, *table);
    auto t2 = std::chrono::steady_clock::now();
    const double c2 = cpu_seconds();
    auto sim = routing::simulate(f, order, sched, **router);
    auto t3 = std::chrono::steady_clock::now();
    const double c3 = cpu_seconds();
    auto ecmp = routing::make_ecmp_router(f, order, {.seed = 1}).value();
    auto crossbar = routing::make_crossbar_router(f, order);
    auto base = routing::simulate(f, order, sched, *ecmp);
    auto ideal = routing::simulate(f, order, sched, *crossbar);
    if (!sim || !base || !ideal || sim->seconds > base->seconds * 1.0001 || sim->seconds < ideal->seconds * 0.9999) {
      state.SkipWithError("planned 3-tier simulation is slower than ECMP or faster than the ideal switch");
      return;
    }
    plan_s = std::chrono::duration<double>(t1 - t0).count();
    sim_s = std::chrono::duration<double>(t3 - t2).count();
    plan_cpu = c1 - c0;
    sim_cpu = c3 - c2;
    max_load = planned->stats.max_load;
    bound = planned->stats.max_lower_bound;
    for (const auto& st : base->steps) solves += st.solves, events += st.events;
    state.counters["vs_ideal"] = ideal->seconds / sim->seconds;
    state.counters["ecmp_vs_ideal"] = ideal->seconds / base->seconds;
  }
  state.counters["plan_s"] = plan_s;
  state.counters["plan_cpu_s"] = plan_cpu;
  state.counters["simulate_s"] = sim_s;
  state.counters["simulate_cpu_s"] = sim_cpu;
  state.counters["max_load"] = max_load;
  state.counters["lower_bound"] = bound;
  // ECMP's steps finish at many times; the fluid model re-solves only when
  // a survivor's rate can change (fluid_step.h).
  state.counters["ecmp_events"] = events;
  state.counters["ecmp_solves"] = solves;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}
BENCHMARK(BM_PlanAndSimulate3Tier)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
