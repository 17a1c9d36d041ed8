#include "weft/routing/gates.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include <fmt/format.h>


namespace weft::routing {

namespace {

struct Occurrence {
  int step;
  int round;
  const PlanFlow* flow;
};

bool uses_rounds(const RoutePlan& plan) {
  for (const PlanFlow& f : plan.flows) {
    for (int r : f.rounds) {
      if (r != 0) return true;
    }
  }
  return false;
}

}  // namespace

Result<std::vector<Gate>> plan_gates(const RoutePlan& plan) {
  if (!uses_rounds(plan)) return std::vector<Gate>{};
  // Directed link (from switch, to switch) -> the occurrences crossing it.
  std::map<std::pair<std::string, std::string>, std::vector<Occurrence>> on_link;
  for (const PlanFlow& f : plan.flows) {
    if (f.steps.empty()) {
      return invalid_argument(fmt::format("route plan: flow {} -> {} lists no steps, but the plan uses rounds "
                                          "(a flow's steps say when it may use its links)",
                                          f.src_rank, f.dst_rank));
    }
    for (size_t i = 0; i + 1 < f.path.size(); ++i) {
      auto& occ = on_link[{f.path[i], f.path[i + 1]}];
      for (int s : f.steps) occ.push_back({s, f.round_in(s), &f});
    }
  }
  // (waiter, from, after_step) -> earliest step that needs it.
  std::map<std::tuple<int, int, int>, int> earliest;
  for (auto& [link, occ] : on_link) {
    std::sort(occ.begin(), occ.end(), [](const Occurrence& x, const Occurrence& y) {
      return std::tie(x.step, x.round, x.flow->src_rank, x.flow->dst_rank) <
             std::tie(y.step, y.round, y.flow->src_rank, y.flow->dst_rank);
    });
    // prev = [prev_lo, prev_hi): the latest slot before the current one.
    size_t prev_lo = 0, prev_hi = 0;
    for (size_t lo = 0; lo < occ.size();) {
      size_t hi = lo;
      while (hi < occ.size() && occ[hi].step == occ[lo].step && occ[hi].round == occ[lo].round) ++hi;
      for (size_t i = lo; i < hi; ++i) {
        const int a = occ[i].flow->src_rank;
        for (size_t k = prev_lo; k < prev_hi; ++k) {
          const int d = occ[k].flow->dst_rank;
          if (d == a) continue;
          auto [it, fresh] = earliest.emplace(std::make_tuple(a, d, occ[k].step), occ[i].step);
          if (!fresh) it->second = std::min(it->second, occ[i].step);
        }
      }
      prev_lo = lo;
      prev_hi = hi;
      lo = hi;
    }
  }
  std::vector<Gate> gates;
  gates.reserve(earliest.size());
  for (const auto& [key, step] : earliest) {
    gates.push_back(Gate{step, std::get<0>(key), std::get<1>(key), std::get<2>(key)});
  }
  std::sort(gates.begin(), gates.end(), [](const Gate& x, const Gate& y) {
    return std::tie(x.step, x.waiter, x.from, x.after_step) < std::tie(y.step, y.waiter, y.from, y.after_step);
  });
  return gates;
}

Result<std::vector<Gate>> ring_plan_gates(const RoutePlan& plan) {
  if (!uses_rounds(plan)) return std::vector<Gate>{};
  const int p = plan.ranks;
  RoutePlan reps = plan;
  for (PlanFlow& f : reps.flows) {
    if (f.dst_rank != (f.src_rank + 1) % p) {
      return invalid_argument(fmt::format("route plan: flow {} -> {} is not a ring flow (r -> r + 1) of {} ranks",
                                          f.src_rank, f.dst_rank, p));
    }
    PlanFlow& out = f;
    const PlanFlow in = f;
    out.steps.clear();
    out.rounds.clear();
    for (int phase = 0; phase < 2; ++phase) {
      for (int i = 0; i + 1 < p; ++i) {
        out.steps.push_back(phase * (p - 1) + i);
        out.rounds.push_back(in.round_in(phase));
      }
    }
  }
  return plan_gates(reps);
}

}  // namespace weft::routing
