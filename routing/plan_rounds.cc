// plan.h apply_plan_rounds: a route plan's time slices onto a schedule.
#include <algorithm>

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
  // A step's flows by source rank (a rank sends a few in a step: nccl-ring's
  // channels x QPs), so a look-up scans those; buffers reused across steps.
  std::vector<uint32_t> first, fill, by_src;
  for (size_t si = 0; si < s.steps.size(); ++si) {
    Step& st = s.steps[si];
    int ranks = 0;  // sources are 0 .. ranks - 1
    for (const Flow& fl : st.flows) {
      if (fl.src < 0) return invalid_argument(fmt::format("step {} ({}) has a flow from rank {}", si, st.phase, fl.src));
      ranks = std::max(ranks, fl.src + 1);
    }
    first.assign(static_cast<size_t>(ranks) + 1, 0);
    for (const Flow& fl : st.flows) ++first[static_cast<size_t>(fl.src) + 1];
    for (size_t r = 0; r + 1 < first.size(); ++r) first[r + 1] += first[r];
    fill.assign(first.begin(), first.end() - 1);
    by_src.resize(st.flows.size());
    for (size_t j = 0; j < st.flows.size(); ++j) {
      by_src[fill[static_cast<size_t>(st.flows[j].src)]++] = static_cast<uint32_t>(j);
    }
    for (const auto& [i, r] : wanted[si]) {
      const PlanFlow& pf = plan.flows[i];
      const FlowId want{pf.src_rank, pf.dst_rank, pf.conn, pf.qp};
      const bool sends = pf.src_rank >= 0 && pf.src_rank < ranks;
      const auto b = by_src.begin() + (sends ? first[static_cast<size_t>(pf.src_rank)] : 0);
      const auto e = by_src.begin() + (sends ? first[static_cast<size_t>(pf.src_rank) + 1] : 0);
      const auto it = std::find_if(b, e, [&](uint32_t j) { return flow_id(st.flows[j]) == want; });
      if (it == e) {
        return invalid_argument(fmt::format("plan flow {} (rank {} -> {}) lists step {} ({}), which has no such flow", i,
                                            pf.src_rank, pf.dst_rank, si, st.phase));
      }
      st.flows[*it].round = r;
    }
  }
  return ok_status();
}

}  // namespace weft::routing
