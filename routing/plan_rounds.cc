// plan.h apply_plan_rounds: a route plan's time slices onto a schedule.
#include <unordered_map>

#include <fmt/format.h>

#include "weft/routing/plan.h"

namespace weft::routing {

Status apply_plan_rounds(const RoutePlan& plan, Schedule& s) {
  for (Step& st : s.steps) {
    for (Flow& fl : st.flows) fl.round = 0;
  }
  // Per step, the plan flows that serve it and their round there.
  std::vector<std::vector<std::pair<size_t, int>>> wanted(s.steps.size());  // (plan flow, round)
  for (size_t i = 0; i < plan.flows.size(); ++i) {
    const PlanFlow& pf = plan.flows[i];
    for (size_t k = 0; k < pf.steps.size(); ++k) {
      const int step = pf.steps[k];
      if (step < 0 || static_cast<size_t>(step) >= s.steps.size()) {
        return invalid_argument(fmt::format("plan flow {} (rank {} -> {}) lists step {}, but the schedule has {} steps",
                                            i, pf.src_rank, pf.dst_rank, step, s.steps.size()));
      }
      const int r = k < pf.rounds.size() ? pf.rounds[k] : 0;
      if (r < 0) return invalid_argument(fmt::format("plan flow {} (rank {} -> {}): round {} in step {} is negative", i,
                                                     pf.src_rank, pf.dst_rank, r, step));
      wanted[static_cast<size_t>(step)].emplace_back(i, r);
    }
  }
  std::unordered_map<FlowId, size_t, FlowIdHash> index;  // -> flow of the step
  for (size_t si = 0; si < s.steps.size(); ++si) {
    Step& st = s.steps[si];
    index.clear();
    for (size_t j = 0; j < st.flows.size(); ++j) {
      index.emplace(flow_id(st.flows[j]), j);
    }
    for (const auto& [i, r] : wanted[si]) {
      const PlanFlow& pf = plan.flows[i];
      auto it = index.find(FlowId{pf.src_rank, pf.dst_rank, pf.conn, pf.qp});
      if (it == index.end()) {
        return invalid_argument(fmt::format("plan flow {} (rank {} -> {}) lists step {} ({}), which has no such flow", i,
                                            pf.src_rank, pf.dst_rank, si, st.phase));
      }
      st.flows[it->second].round = r;
    }
  }
  return ok_status();
}

}  // namespace weft::routing
