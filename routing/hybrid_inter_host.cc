#include "weft/routing/hybrid_inter_host.h"

namespace weft::routing {

Result<Schedule> hybrid_inter_host(const std::vector<std::vector<int>>& hosts, uint64_t count, uint32_t elem_size) {
  if (hosts.empty() || hosts.front().empty()) return invalid_argument("hybrid allreduce needs at least one rank");
  const size_t G = hosts.front().size();
  int ranks = 0;
  for (const auto& h : hosts) {
    if (h.size() != G) return invalid_argument("hybrid allreduce needs the same number of ranks on every host");
    ranks += static_cast<int>(h.size());
  }
  const uint64_t part = (count + G - 1) / G;  // elements each group reduces
  WEFT_ASSIGN_OR_RETURN(Schedule group, build_schedule(Collective::kAllreduceHd, static_cast<int>(hosts.size()), part,
                                                       elem_size));
  Schedule out{Collective::kAllreduceHybrid, ranks, count, elem_size, {}};
  for (const Step& gs : group.steps) {
    Step st{gs.phase, gs.distance, gs.repeat, {}};
    st.flows.reserve(gs.flows.size() * G);
    for (size_t k = 0; k < G; ++k) {
      for (const Flow& fl : gs.flows) {
        st.flows.push_back({hosts[static_cast<size_t>(fl.src)][k], hosts[static_cast<size_t>(fl.dst)][k], fl.bytes});
      }
    }
    out.steps.push_back(std::move(st));
  }
  return out;
}

}  // namespace weft::routing
