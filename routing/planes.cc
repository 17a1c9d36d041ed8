#include "weft/routing/planes.h"

#include <fmt/format.h>

#include "weft/routing/paths.h"

namespace weft::routing {

int plane_carrier(const topo::Fabric& f, int src, int dst) {
  const int ps = f.nic_plane(src), pd = f.nic_plane(dst);
  if (ps == pd) return dst;
  // dst's position among its host's NICs on its plane, then the NIC at that
  // position on src's plane (a host lists at most a few dozen NICs).
  const auto& nics = f.hosts[static_cast<size_t>(f.nics[static_cast<size_t>(dst)].host)].nics;
  int pos = 0;
  for (int n : nics) {
    if (n == dst) break;
    pos += f.nic_plane(n) == pd;
  }
  for (int n : nics) {
    if (f.nic_plane(n) == ps && pos-- == 0) return n;
  }
  return -1;
}

Status check_flow_access(const topo::Fabric& f, const Flow& fl, int src_nic, int dst_nic) {
  for (int nic : {src_nic, dst_nic}) {
    if (auto st = check_access_link(f, nic); !st) {
      return Status(st.code(), fmt::format("no path rank {} ({}) -> rank {} ({}): {}; no source port avoids it: "
                                           "bring the link up or leave that NIC out of the job (weft rank --hosts)",
                                           fl.src, f.nic_qualified_name(src_nic), fl.dst,
                                           f.nic_qualified_name(dst_nic), st.message()));
    }
  }
  return ok_status();
}

Result<FlowNics> routed_nics(const topo::Fabric& f, const ranking::RankOrder& order, const Flow& fl) {
  const FlowNics n = flow_nics(f, order, fl);
  if (n.dst >= 0) {
    if (!n.in_nic()) WEFT_RETURN_IF_ERROR(check_flow_access(f, fl, n.src, n.dst));
    return n;
  }
  const int d = order.nics[static_cast<size_t>(fl.dst)];
  return unavailable(fmt::format("no path rank {} ({}, plane {}) -> rank {} ({}, plane {}): host '{}' has no NIC on "
                                 "plane {} at that NIC's position, and planes share no switch",
                                 fl.src, f.nic_qualified_name(n.src), f.nic_plane(n.src), fl.dst,
                                 f.nic_qualified_name(d), f.nic_plane(d),
                                 f.hosts[static_cast<size_t>(f.nics[static_cast<size_t>(d)].host)].name,
                                 f.nic_plane(n.src)));
}

}  // namespace weft::routing
