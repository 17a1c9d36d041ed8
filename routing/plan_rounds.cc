// plan.h apply_plan_rounds: a route plan's time slices onto a schedule.
#include <algorithm>

#include <fmt/format.h>

#include "source_index.h"
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
  SourceIndex by_src;  // a step's flows (source_index.h)
  for (size_t si = 0; si < s.steps.size(); ++si) {
    Step& st = s.steps[si];
    for (const Flow& fl : st.flows) {
      if (fl.src < 0 || fl.src >= s.ranks) {
        return invalid_argument(fmt::format("step {} ({}) has a flow from rank {}, not a rank of the schedule's {}", si,
                                            st.phase, fl.src, s.ranks));
      }
    }
    by_src.build(static_cast<size_t>(std::max(s.ranks, 0)), st.flows.size(), [&](size_t j) { return st.flows[j].src; });
    for (const auto& [i, r] : wanted[si]) {
      const PlanFlow& pf = plan.flows[i];
      const FlowId want{pf.src_rank, pf.dst_rank, pf.conn, pf.qp};
      const auto mine = by_src.of(pf.src_rank);
      const auto it = std::find_if(mine.begin(), mine.end(), [&](uint32_t j) { return flow_id(st.flows[j]) == want; });
      if (it == mine.end()) {
        return invalid_argument(fmt::format("plan flow {} (rank {} -> {}) lists step {} ({}), which has no such flow", i,
                                            pf.src_rank, pf.dst_rank, si, st.phase));
      }
      st.flows[*it].round = r;
    }
  }
  return ok_status();
}

}  // namespace weft::routing
