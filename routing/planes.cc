#include "weft/routing/planes.h"

#include <fmt/format.h>

#include "weft/routing/paths.h"

namespace weft::routing {

namespace {

// Whether NIC n is a port on plane `plane` bound to the GPUs `gpus`.
bool same_group(const topo::Fabric& f, int n, int plane, const std::vector<int>& gpus) {
  return f.nic_plane(n) == plane && f.nics[static_cast<size_t>(n)].gpus == gpus;
}

}  // namespace

int plane_carrier(const topo::Fabric& f, int src, int dst) {
  const int ps = f.nic_plane(src), pd = f.nic_plane(dst);
  if (ps == pd) return dst;
  // A NIC's ports are bound to the same GPUs, so dst's NIC is found among the
  // host's ports with dst's binding: dst's position among those on its
  // plane is the carrier's among those on src's plane. Both planes must
  // hold equally many, or a port is missing and a position would name
  // another NIC's port: then there is no carrier. (A host lists at most a
  // few dozen NICs.)
  const topo::Nic& d = f.nics[static_cast<size_t>(dst)];
  const auto& nics = f.hosts[static_cast<size_t>(d.host)].nics;
  int pos = -1, on_pd = 0, on_ps = 0;
  for (int n : nics) {
    if (n == dst) pos = on_pd;
    on_pd += same_group(f, n, pd, d.gpus);
    on_ps += same_group(f, n, ps, d.gpus);
  }
  if (on_pd != on_ps) return -1;
  for (int n : nics) {
    if (same_group(f, n, ps, d.gpus) && pos-- == 0) return n;
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
  return unavailable(fmt::format("no path rank {} ({}, plane {}) -> rank {} ({}, plane {}): host '{}' has no port of "
                                 "that NIC on plane {} (ports bound to the same GPUs, matched by position), and planes "
                                 "share no switch",
                                 fl.src, f.nic_qualified_name(n.src), f.nic_plane(n.src), fl.dst,
                                 f.nic_qualified_name(d), f.nic_plane(d),
                                 f.hosts[static_cast<size_t>(f.nics[static_cast<size_t>(d)].host)].name,
                                 f.nic_plane(n.src)));
}

}  // namespace weft::routing
