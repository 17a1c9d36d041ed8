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
  const uint64_t part = (count + G - 1) / G;  // elements each group reduces
  out.intra_bytes = (count - count / G) * elem_size;
  WEFT_ASSIGN_OR_RETURN(Schedule group, build_schedule(Collective::kAllreduceHd, out.hosts, part, elem_size));
  out.inter_host = Schedule{Collective::kAllreduceHybrid, order.size(), count, elem_size, {}};
  for (const Step& gs : group.steps) {
    Step st{gs.phase, gs.distance, gs.repeat, {}};
    st.flows.reserve(gs.flows.size() * G);
    for (size_t k = 0; k < G; ++k) {
      for (const Flow& fl : gs.flows) {
        st.flows.push_back({by_host[host_order[static_cast<size_t>(fl.src)]][k],
                            by_host[host_order[static_cast<size_t>(fl.dst)]][k], fl.bytes});
      }
    }
    out.inter_host.steps.push_back(std::move(st));
  }
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
