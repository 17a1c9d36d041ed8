// The planner's options and the ports it derives from them (planner.h):
// validation, listen ports, nccl-ring's premises.
#include <fmt/format.h>

#include "weft/routing/planner.h"

namespace weft::routing {

Status validate(const PlannerOptions& opt, const topo::Fabric& f, const ranking::RankOrder& order) {
  if (opt.protocol != "udp" && opt.protocol != "tcp") {
    return invalid_argument(fmt::format("unknown protocol '{}' (udp, tcp)", opt.protocol));
  }
  if (opt.sports.size() == 0 || opt.sports.lo == 0) {
    return invalid_argument(fmt::format("source port range {}-{} is empty", opt.sports.lo, opt.sports.hi));
  }
  if (opt.protocol == "udp" && opt.sports.lo < kRoceSportMin) {
    return invalid_argument(fmt::format("source port range {}-{} reaches below {}: a RoCE v2 (udp) source port is "
                                        "derived from the QP's flow label and is always in {}-65535",
                                        opt.sports.lo, opt.sports.hi, kRoceSportMin, kRoceSportMin));
  }
  if (opt.ports_per_pair < 1) return invalid_argument(fmt::format("ports per pair must be >= 1 (got {})", opt.ports_per_pair));
  if (opt.first_ports < 0) return invalid_argument(fmt::format("first ports must be >= 0 (got {})", opt.first_ports));
  if (opt.budget < 0) return invalid_argument("the search budget must be >= 0");
  if (opt.protocol == "tcp") {
    WEFT_ASSIGN_OR_RETURN(auto dports, listen_ports(f, order, opt));
    for (uint16_t p : dports) {
      if (opt.sports.contains(p)) {
        return invalid_argument(fmt::format("listen port {} lies inside the source port range {}-{}", p, opt.sports.lo,
                                            opt.sports.hi));
      }
    }
  }
  return ok_status();
}

Status refuse_qpn_pool(const PathTable& table) {
  return invalid_argument(fmt::format("a QPN pool needs a fabric whose switches hash the destination QP "
                                      "(--hash crc32-qp); {} does not, so QPNs cannot change a path",
                                      table.describe()));
}

Status validate_qpns(const PathTable& table, const PlannerOptions& opt, int ranks) {
  if (!table.hashes_qpn()) return opt.qpns.empty() ? ok_status() : refuse_qpn_pool(table);
  if (opt.protocol != "udp") {
    return invalid_argument(fmt::format("{} hashes the RoCEv2 destination QP, but protocol {} has none: "
                                        "plan udp (RoCEv2) flows, or use a model without QPNs",
                                        table.describe(), opt.protocol));
  }
  if (opt.qpns.empty()) return ok_status();  // the planner sizes the default pool to the schedule
  if (opt.qpns.size() != static_cast<size_t>(ranks)) {
    return invalid_argument(fmt::format("the QPN pool lists {} ranks, the job has {}", opt.qpns.size(), ranks));
  }
  for (size_t r = 0; r < opt.qpns.size(); ++r) {
    if (opt.qpns[r].empty()) return invalid_argument(fmt::format("the QPN pool has no QPN for rank {}", r));
    for (uint32_t q : opt.qpns[r]) {
      if (q < kMinDataQpn || q > kMaxQpn) {
        return invalid_argument(fmt::format("QPN {} of rank {} is not a data QP number ({}..{})", q, r, kMinDataQpn,
                                            kMaxQpn));
      }
    }
  }
  return ok_status();
}

Result<std::vector<uint16_t>> listen_ports(const topo::Fabric& f, const ranking::RankOrder& order,
                                           const PlannerOptions& opt) {
  std::vector<uint16_t> out(order.nics.size(), kRoceV2Port);
  if (opt.protocol != "tcp") return out;
  std::vector<int> on_host(f.hosts.size(), 0);
  for (size_t r = 0; r < order.nics.size(); ++r) {
    const int host = f.nics[static_cast<size_t>(order.nics[r])].host;
    const int p = opt.tcp_dport + on_host[static_cast<size_t>(host)]++;
    if (opt.tcp_dport < 1 || p > 65535) {
      return invalid_argument(fmt::format("listen port {} of rank {} (host '{}') is outside 1-65535", p, r,
                                          f.hosts[static_cast<size_t>(host)].name));
    }
    out[r] = static_cast<uint16_t>(p);
  }
  return out;
}

Status validate_nccl_ring(const topo::Fabric& f, const ranking::RankOrder& order, const PlannerOptions& opt) {
  if (opt.protocol != "udp") {
    return invalid_argument(fmt::format("nccl-ring plans RoCE v2 QPs: protocol '{}' must be udp", opt.protocol));
  }
  std::vector<int> rank_on(f.hosts.size(), -1);
  for (size_t r = 0; r < order.nics.size(); ++r) {
    const int host = f.nics[static_cast<size_t>(order.nics[r])].host;
    int& first = rank_on[static_cast<size_t>(host)];
    if (first >= 0) {
      return invalid_argument(fmt::format(
          "nccl-ring needs one rank per host: ranks {} and {} both run on '{}' (NCCL joins the GPUs of one host inside "
          "it; rank each host's NIC once)", first, r, f.hosts[static_cast<size_t>(host)].name));
    }
    first = static_cast<int>(r);
  }
  return ok_status();
}

}  // namespace weft::routing
