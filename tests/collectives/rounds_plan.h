// Synthetic route plans with rounds for the collective tests: ranks on
// leaves of `per_leaf`, each directed pair on a random spine, and per step
// first-fit rounds on shared directed links — what the planner does when a
// leaf has fewer uplinks than hosts (docs/route-plan.md "Rounds"). Flows
// are "udp" (RoCEv2) so that the TCP and loopback tests need no free ports:
// gates do not depend on the protocol.
#pragma once

#include <algorithm>
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

// A ring plan with rounds: rank r on leaf r % leaves (so every ring flow
// r -> r+1 leaves its leaf), each flow on a random spine of `spines`, and
// per step first-fit rounds on shared directed links — ring-rs in rank
// order, ring-ag in reverse, so the two steps' rounds differ.
inline routing::RoutePlan ring_rounds_plan(int ranks, int leaves, int spines, unsigned seed) {
  std::mt19937 rng(seed);
  routing::RoutePlan plan;
  plan.collective = "allreduce-ring";
  plan.topology = "synthetic";
  plan.ranks = ranks;
  auto leaf = [&](int r) { return "l" + std::to_string(r % leaves); };
  for (int r = 0; r < ranks; ++r) {
    routing::PlanFlow f;
    f.src_rank = r;
    f.dst_rank = (r + 1) % ranks;
    f.src_host = "h" + std::to_string(r);
    f.dst_host = "h" + std::to_string(f.dst_rank);
    f.protocol = "udp";
    f.sport = static_cast<uint16_t>(49152 + r);
    f.dport = 4791;
    f.path = {leaf(r)};
    if (leaf(r) != leaf(f.dst_rank)) {
      f.path.push_back("s" + std::to_string(rng() % static_cast<unsigned>(spines)));
      f.path.push_back(leaf(f.dst_rank));
    }
    f.steps = {0, 1};
    f.rounds = {0, 0};
    plan.flows.push_back(f);
  }
  for (int step = 0; step < 2; ++step) {
    std::map<std::pair<std::string, std::string>, std::set<int>> busy;
    int rounds = 1;
    for (int k = 0; k < ranks; ++k) {
      routing::PlanFlow& f = plan.flows[static_cast<size_t>(step == 0 ? k : ranks - 1 - k)];
      int r = 0;
      auto clashes = [&](int round) {
        for (size_t i = 0; i + 1 < f.path.size(); ++i) {
          if (busy[{f.path[i], f.path[i + 1]}].count(round)) return true;
        }
        return false;
      };
      while (clashes(r)) ++r;
      for (size_t i = 0; i + 1 < f.path.size(); ++i) busy[{f.path[i], f.path[i + 1]}].insert(r);
      f.rounds[static_cast<size_t>(step)] = r;
      rounds = std::max(rounds, r + 1);
    }
    routing::PlanStep ps;
    ps.step = step;
    ps.phase = step == 0 ? "ring-rs" : "ring-ag";
    ps.max_load = 1;
    ps.lower_bound = 1;
    ps.rounds = rounds;
    plan.steps.push_back(ps);
  }
  return plan;
}

}  // namespace weft::coll::testing
