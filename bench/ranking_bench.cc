// Ranking and checking at scale: a 65,536-endpoint 2-tier Clos (64 spines x
// 1024 leaves x 64 hosts). The bar is ranking < 1 s on this machine;
// the benchmark aborts (state.SkipWithError) if an order is not a permutation
// or the checker does not see load 1 under ideal routes, so a fast wrong
// answer never reports a time.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <random>

#include "weft/ranking/rank_order.h"
#include "weft/routing/link_load.h"
#include "weft/topology/builders.h"

namespace {

using namespace weft;

const topo::Fabric& fabric_for(int endpoints) {
  static std::map<int, topo::Fabric> cache;
  auto it = cache.find(endpoints);
  if (it == cache.end()) {
    const int hosts = 64, leaves = endpoints / hosts;
    auto f = topo::build_clos2({.spines = 64, .leaves = leaves, .hosts_per_leaf = hosts});
    it = cache.emplace(endpoints, std::move(*f)).first;
  }
  return it->second;
}

std::vector<int> shuffled_allocation(const topo::Fabric& f) {
  auto alloc = ranking::allocation_all(f);
  std::shuffle(alloc.begin(), alloc.end(), std::mt19937(42));
  return alloc;
}

void BM_RankClos(benchmark::State& state) {
  const auto& f = fabric_for(static_cast<int>(state.range(0)));
  const auto alloc = shuffled_allocation(f);
  for (auto _ : state) {
    auto order = ranking::rank(f, alloc, ranking::RankAlgo::kClos);
    if (!order || order->size() != static_cast<int>(alloc.size())) {
      state.SkipWithError("ranking failed");
      return;
    }
    benchmark::DoNotOptimize(order->nics.data());
  }
  state.counters["endpoints"] = static_cast<double>(alloc.size());
}
BENCHMARK(BM_RankClos)->Arg(4096)->Arg(65536)->Unit(benchmark::kMillisecond);

void BM_CheckHdIdeal(benchmark::State& state) {
  const auto& f = fabric_for(static_cast<int>(state.range(0)));
  auto order = ranking::rank(f, shuffled_allocation(f), ranking::RankAlgo::kClos);
  auto sched = routing::build_schedule(routing::Collective::kAllreduceHd, order->size(), 1 << 24);
  for (auto _ : state) {
    auto router = routing::make_ideal_router(f, *order);
    auto rep = routing::check_link_load(f, *order, *sched, *router);
    if (!rep || rep->max_load != 1) {
      state.SkipWithError("checker did not see load 1 under ideal routes");
      return;
    }
  }
  state.counters["flows"] = static_cast<double>(order->size()) * static_cast<double>(sched->steps.size());
}
BENCHMARK(BM_CheckHdIdeal)->Arg(4096)->Arg(65536)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
