#include "weft/routing/hybrid_schedule.h"

#include <map>

#include <fmt/format.h>

namespace weft::routing {

Result<HybridSchedule> build_hybrid_schedule(const topo::Fabric& f, const ranking::RankOrder& order, uint64_t count,
                                             uint32_t elem_size) {
  if (order.size() < 1) return invalid_argument("a collective needs at least one rank");
  // groups[k] = the k-th rank (in rank order) of every host, hosts in order
  // of their first rank.
  std::map<int, std::vector<int>> by_host;
  std::vector<int> host_order;
  for (int r = 0; r < order.size(); ++r) {
    const int h = f.nics[static_cast<size_t>(order.nics[static_cast<size_t>(r)])].host;
    auto [it, fresh] = by_host.try_emplace(h);
    if (fresh) host_order.push_back(h);
    it->second.push_back(r);
  }
  const size_t G = by_host.begin()->second.size();
  for (const auto& [h, ranks] : by_host) {
    if (ranks.size() != G) {
      return invalid_argument(fmt::format("hybrid allreduce needs the same number of ranks on every host: '{}' has {}, "
                                          "'{}' has {}", f.hosts[static_cast<size_t>(by_host.begin()->first)].name, G,
                                          f.hosts[static_cast<size_t>(h)].name, ranks.size()));
    }
  }
  HybridSchedule out;
  out.ranks_per_host = static_cast<int>(G);
  out.hosts = static_cast<int>(host_order.size());
  out.intra_bytes = (count - count / G) * elem_size;
  std::vector<std::vector<int>> hosts;
  for (int h : host_order) hosts.push_back(by_host[h]);
  WEFT_ASSIGN_OR_RETURN(out.inter_host, hybrid_inter_host(hosts, count, elem_size));
  return out;
}

Result<Schedule> build_fabric_schedule(const topo::Fabric& f, const ranking::RankOrder& order, Collective c,
                                       uint64_t count, uint32_t elem_size, const NcclRingShape& shape) {
  if (c != Collective::kAllreduceHybrid) return build_schedule(c, order.size(), count, elem_size, shape);
  if (shape.channels != 1 || shape.qps != 1) {
    return invalid_argument("allreduce-hybrid has one flow per pair of ranks: channels and QPs are for nccl-ring");
  }
  WEFT_ASSIGN_OR_RETURN(auto h, build_hybrid_schedule(f, order, count, elem_size));
  return std::move(h.inter_host);
}

}  // namespace weft::routing
