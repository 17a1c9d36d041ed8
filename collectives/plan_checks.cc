// A route plan against the communicator (plan_epochs.h): its TCP
// connections per pair against connections_per_peer, and a hybrid
// AllReduce plan against the communicator's hosts. A hybrid plan's flows
// are the inter-host HD's of routing::build_hybrid_schedule, whose hosts
// are the fabric's; the library's hosts are the ranks' host names
// (CommConfig::host). Both order hosts by their first rank and local ranks
// by rank, so the two agree exactly when every flow of the plan is one the
// library sends.
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

int plan_connections(const routing::RoutePlan& plan) {
  int q = 1;
  for (const auto& f : plan.flows) q = std::max(q, f.conn + 1);
  return std::min(q, 64);
}

Status check_plan_connections(const routing::RoutePlan& plan, int per_peer, bool epochs) {
  std::map<std::pair<int, int>, std::set<int>> conns;
  for (const auto& f : plan.flows) conns[{f.src_rank, f.dst_rank}].insert(f.conn);
  size_t q = 1;
  for (const auto& [pair, c] : conns) {
    if (*c.begin() != 0 || *c.rbegin() != static_cast<int>(c.size()) - 1 ||
        (pair != conns.begin()->first && c.size() != q)) {
      return invalid_argument(fmt::format("communicator: the route plan's flows {} -> {} are connections {}; every "
                                          "pair needs connections 0..Q-1, the same Q for all",
                                          pair.first, pair.second, fmt::join(c, ", ")));
    }
    q = c.size();
  }
  if (static_cast<int>(q) != per_peer) {
    return invalid_argument(fmt::format("communicator: the route plan has {} TCP connection{} per directed pair, "
                                        "connections_per_peer is {}: they must be equal",
                                        q, q == 1 ? "" : "s", per_peer));
  }
  if (q > 1) {
    // All connections of a pair carry a striped message at once: no gate
    // can hold one of them behind another (routing/gates.h), and plan
    // epochs compare plans flow by pair.
    for (const auto& f : plan.flows) {
      for (int r : f.rounds) {
        if (r != 0) {
          return invalid_argument(fmt::format("communicator: the route plan has {} connections per pair and rounds "
                                              "(flow {} -> {} connection {}): a pair's connections run at once",
                                              q, f.src_rank, f.dst_rank, f.conn));
        }
      }
    }
    if (epochs) {
      return invalid_argument(fmt::format("communicator: plan epochs need one connection per pair; the route plan "
                                          "has {}",
                                          q));
    }
  }
  return ok_status();
}

}  // namespace weft::coll::internal
