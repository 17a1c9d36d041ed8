// Reading a route plan (routing/plan_parse.cc) against nlohmann::json
// building the plan's tree, the first of the two passes of the reader
// before it (a tree of every value, then a PlanFlow of each flow object):
// the baseline is a lower bound of that reader's cost, so the ratio
// understates the gain. Every rank of a job reads the whole plan, so its cost
// is paid once per rank at startup.
//
// The plan is HD AllReduce's on a 2-tier Clos of 64 hosts per leaf, made
// here in the planner's shape and file format (names, paths, steps, and
// rounds on every fourth flow): log2(P) flows per rank, ~10^6 at 65,536
// ranks (332 MB of JSON). Each run first checks that the reader gives back
// the plan it was written from (else ERROR OCCURRED). Counters: CPU seconds
// of one read, the same of the tree alone, their ratio, and the process's
// peak RSS (run one benchmark per process to compare peaks).
#include <benchmark/benchmark.h>

#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_clock.h"
#include "weft/routing/plan.h"

namespace {

using namespace weft;
using bench::cpu_seconds;
using bench::peak_rss_mib;

constexpr int kHostsPerLeaf = 64;
constexpr int kSpines = 64;

routing::RoutePlan hd_plan(int ranks) {
  routing::RoutePlan p;
  p.collective = "allreduce-hd";
  p.topology = fmt::format("clos2-{}x{}x{}x1", kSpines, ranks / kHostsPerLeaf, kHostsPerLeaf);
  p.ranks = ranks;
  int dims = 0;
  while ((1 << dims) < ranks) ++dims;
  auto host = [](int r) { return fmt::format("h{}-{}", r / kHostsPerLeaf + 1, r % kHostsPerLeaf + 1); };
  auto leaf = [](int r) { return fmt::format("l{}", r / kHostsPerLeaf + 1); };
  for (int r = 0; r < ranks; ++r) {
    for (int k = 0; k < dims; ++k) {
      const int peer = r ^ (1 << k);
      routing::PlanFlow f;
      f.src_rank = r;
      f.dst_rank = peer;
      f.src_host = host(r);
      f.dst_host = host(peer);
      f.sport = static_cast<uint16_t>(49152 + (r * 31 + k * 7) % 16384);
      f.dport = 4791;
      f.path = {leaf(r)};
      if (leaf(r) != leaf(peer)) f.path = {leaf(r), fmt::format("s{}", (r + k) % kSpines + 1), leaf(peer)};
      f.steps = {k, 2 * dims - 1 - k};
      if ((r + k) % 4 == 0) f.rounds = {1, 0};
      p.flows.push_back(std::move(f));
    }
  }
  for (int s = 0; s < 2 * dims; ++s) {
    p.steps.push_back({s, s < dims ? "rs" : "ag", 1, 1, 2});
  }
  return p;
}

struct Sample {
  routing::RoutePlan plan;
  std::string text;
};

const Sample& sample(int ranks) {
  static std::map<int, Sample> cache;
  auto it = cache.find(ranks);
  if (it == cache.end()) {
    Sample s{hd_plan(ranks), {}};
    s.text = routing::plan_to_json(s.plan);
    s.text.reserve(s.text.size() + 64);  // simdjson's padding, as load_plan reads files: no copy
    it = cache.emplace(ranks, std::move(s)).first;
  }
  return it->second;
}

// Both in each iteration, one after the other, so the ratio is of the same
// minutes on a shared machine.
void BM_ReadPlanVsTree(benchmark::State& state) {
  const Sample& s = sample(static_cast<int>(state.range(0)));
  {
    auto back = routing::parse_plan(s.text);
    if (!back || *back != s.plan) {
      state.SkipWithError(back ? "the plan read back differs from the plan written" : back.status().message().c_str());
      return;
    }
  }
  double read = 0, tree = 0;
  for (auto _ : state) {
    double t0 = cpu_seconds();
    auto p = routing::parse_plan(s.text);
    benchmark::DoNotOptimize(p);
    read += cpu_seconds() - t0;
    t0 = cpu_seconds();
    auto j = nlohmann::json::parse(s.text);
    benchmark::DoNotOptimize(j);
    tree += cpu_seconds() - t0;
    if (!p || p->flows.size() != j["flows"].size()) {
      state.SkipWithError("the reader and the tree disagree on the flows");
      return;
    }
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["flows"] = static_cast<double>(s.plan.flows.size());
  state.counters["MB"] = static_cast<double>(s.text.size()) / 1e6;
  state.counters["read_s"] = read / n;
  state.counters["tree_s"] = tree / n;
  state.counters["read/tree"] = read / tree;
}
BENCHMARK(BM_ReadPlanVsTree)->Arg(16384)->Arg(65536)->Unit(benchmark::kMillisecond)->Iterations(2);

// One of the two alone, for its peak memory (the plan and its text are
// made first in both, so the difference of the peaks is the reader's).
void BM_ReadPlanOnly(benchmark::State& state) {
  const Sample& s = sample(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto p = routing::parse_plan(s.text);
    if (!p || p->flows.size() != s.plan.flows.size()) {
      state.SkipWithError("the plan read back has other flows");
      return;
    }
  }
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}
BENCHMARK(BM_ReadPlanOnly)->Arg(65536)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_TreeOnly(benchmark::State& state) {
  const Sample& s = sample(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto j = nlohmann::json::parse(s.text);
    if (j["flows"].size() != s.plan.flows.size()) {
      state.SkipWithError("the tree has other flows");
      return;
    }
  }
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}
BENCHMARK(BM_TreeOnly)->Arg(65536)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
