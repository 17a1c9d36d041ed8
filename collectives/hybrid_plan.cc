// A hybrid AllReduce route plan against the communicator's hosts
// (plan_epochs.h: check_hybrid_plan). The plan's flows are the inter-host
// HD's of routing::build_hybrid_schedule, whose hosts are the fabric's;
// the library's hosts are the ranks' host names (CommConfig::host). Both
// order hosts by their first rank and local ranks by rank, so the two
// agree exactly when every flow of the plan is one the library sends.
#include <set>
#include <utility>

#include <fmt/format.h>

#include "algorithms/algorithms.h"
#include "plan_epochs.h"
#include "weft/routing/hybrid_inter_host.h"

namespace weft::coll::internal {

Status check_hybrid_plan(const routing::RoutePlan& plan, const std::vector<int>& host_of) {
  const std::vector<std::vector<int>> hosts = equal_hosts(host_of);
  if (hosts.empty()) {
    return invalid_argument("route plan: an allreduce-hybrid plan needs the same number of ranks on every host "
                            "(CommConfig::host)");
  }
  WEFT_ASSIGN_OR_RETURN(routing::Schedule sched, routing::hybrid_inter_host(hosts, 1));
  std::set<std::pair<int, int>> pairs;
  for (const routing::Step& st : sched.steps) {
    for (const routing::Flow& f : st.flows) pairs.emplace(f.src, f.dst);
  }
  // Where rank r sits: (host index, local index).
  std::vector<std::pair<size_t, size_t>> at(host_of.size());
  for (size_t h = 0; h < hosts.size(); ++h) {
    for (size_t k = 0; k < hosts[h].size(); ++k) at[static_cast<size_t>(hosts[h][k])] = {h, k};
  }
  const auto where = [&](int r) {
    if (r < 0 || static_cast<size_t>(r) >= at.size()) return fmt::format("not a rank of {}", at.size());
    const auto [h, k] = at[static_cast<size_t>(r)];
    return fmt::format("local rank {} on the host of rank {}", k, hosts[h].front());
  };
  for (const routing::PlanFlow& f : plan.flows) {
    if (!pairs.count({f.src_rank, f.dst_rank})) {
      return invalid_argument(fmt::format(
          "route plan: flow {} -> {} is not an inter-host flow of hybrid allreduce on this communicator's {} hosts of "
          "{} ranks (rank {} is {}, rank {} is {}; hybrid's flows join equal local ranks of different hosts, hosts in "
          "order of their first rank)",
          f.src_rank, f.dst_rank, hosts.size(), hosts.front().size(), f.src_rank, where(f.src_rank), f.dst_rank,
          where(f.dst_rank)));
    }
  }
  return routing::apply_plan_rounds(plan, sched);
}

}  // namespace weft::coll::internal
