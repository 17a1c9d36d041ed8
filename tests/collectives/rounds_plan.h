// Synthetic route plans with rounds for the collective tests: ranks on
// leaves of `per_leaf`, each directed pair on a random spine, and per step
// first-fit rounds on shared directed links — what the planner does when a
// leaf has fewer uplinks than hosts (docs/route-plan.md "Rounds"). Flows
// are "udp" (RoCEv2) so that the TCP and loopback tests need no free ports:
// gates do not depend on the protocol.
#pragma once

#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "weft/routing/plan.h"
#include "weft/routing/schedule.h"

namespace weft::coll::testing {

inline routing::RoutePlan rounds_plan(int ranks, int per_leaf, int spines, unsigned seed) {
  std::mt19937 rng(seed);
  routing::RoutePlan plan;
  plan.collective = "allreduce-hd";
  plan.topology = "synthetic";
  plan.ranks = ranks;
  const auto sched = routing::build_schedule(routing::Collective::kAllreduceHd, ranks, 1);
  if (!sched) return plan;
  auto leaf = [&](int r) { return "l" + std::to_string(r / per_leaf); };
  std::map<std::pair<int, int>, size_t> index;
  for (size_t i = 0; i < sched->steps.size(); ++i) {
    std::map<std::pair<std::string, std::string>, std::set<int>> busy;  // link -> rounds taken
    int rounds = 1;
    for (const routing::Flow& x : sched->steps[i].flows) {
      auto [it, fresh] = index.emplace(std::make_pair(x.src, x.dst), plan.flows.size());
      if (fresh) {
        routing::PlanFlow f;
        f.src_rank = x.src;
        f.dst_rank = x.dst;
        f.src_host = "h" + std::to_string(x.src);
        f.dst_host = "h" + std::to_string(x.dst);
        f.protocol = "udp";
        f.sport = static_cast<uint16_t>(49152 + plan.flows.size());
        f.dport = 4791;
        f.path = {leaf(x.src)};
        if (leaf(x.src) != leaf(x.dst)) {
          f.path.push_back("s" + std::to_string(rng() % static_cast<unsigned>(spines)));
          f.path.push_back(leaf(x.dst));
        }
        plan.flows.push_back(f);
      }
      routing::PlanFlow& f = plan.flows[it->second];
      int r = 0;
      auto clashes = [&](int round) {
        for (size_t k = 0; k + 1 < f.path.size(); ++k) {
          if (busy[{f.path[k], f.path[k + 1]}].count(round)) return true;
        }
        return false;
      };
      while (clashes(r)) ++r;
      for (size_t k = 0; k + 1 < f.path.size(); ++k) busy[{f.path[k], f.path[k + 1]}].insert(r);
      f.steps.push_back(static_cast<int>(i));
      f.rounds.push_back(r);
      rounds = std::max(rounds, r + 1);
    }
    routing::PlanStep ps;
    ps.step = static_cast<int>(i);
    ps.phase = sched->steps[i].phase;
    ps.max_load = 1;
    ps.lower_bound = 1;
    ps.rounds = rounds;
    plan.steps.push_back(ps);
  }
  return plan;
}

}  // namespace weft::coll::testing
