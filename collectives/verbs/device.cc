#include "weft/verbs/device.h"

#include <net/if.h>

#include <memory>

#include <fmt/format.h>

#include "weft/config.h"
#include "weft/verbs/error.h"
#if WEFT_HAVE_MLX5DV
#include <infiniband/mlx5dv.h>
#endif

namespace weft::verbs {
namespace {

struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
using DeviceList = std::unique_ptr<ibv_device*[], DeviceListDeleter>;

Result<DeviceList> get_device_list(int* count) {
  DeviceList list(ibv_get_device_list(count));
  if (!list) return verbs_errno_error("ibv_get_device_list");
  return list;
}

GidType gid_type_of(std::uint32_t t) {
  switch (t) {
    case IBV_GID_TYPE_ROCE_V1: return GidType::kRoceV1;
    case IBV_GID_TYPE_ROCE_V2: return GidType::kRoceV2;
    default: return GidType::kIb;
  }
}

Result<PortInfo> query_port(ibv_context* ctx, std::uint8_t port_num, int gid_tbl_hint) {
  ibv_port_attr attr{};
  if (int rc = ibv_query_port(ctx, port_num, &attr); rc != 0) {
    return verbs_call_error(fmt::format("ibv_query_port(port {})", port_num), rc);
  }
  PortInfo p;
  p.port_num = port_num;
  p.state = attr.state;
  p.active_mtu = attr.active_mtu;
  p.active_mtu_bytes = mtu_bytes(attr.active_mtu);
  p.link_layer = attr.link_layer;
  if (attr.max_msg_sz > 0) p.max_msg_bytes = attr.max_msg_sz;
  int len = attr.gid_tbl_len > 0 ? attr.gid_tbl_len : gid_tbl_hint;
  for (int i = 0; i < len; ++i) {
    ibv_gid_entry e{};
    // ENODATA marks an empty slot: the table is sparse on RoCE.
    int rc = ibv_query_gid_ex(ctx, port_num, static_cast<std::uint32_t>(i), &e, 0);
    if (rc == ENODATA || rc == -ENODATA) continue;
    if (rc != 0) return verbs_call_error(fmt::format("ibv_query_gid_ex(port {}, index {})", port_num, i), rc);
    GidEntry g;
    g.index = e.gid_index;
    std::copy(std::begin(e.gid.raw), std::end(e.gid.raw), g.gid.begin());
    g.type = gid_type_of(e.gid_type);
    char ifname[IF_NAMESIZE] = {};
    if (e.ndev_ifindex != 0 && if_indextoname(e.ndev_ifindex, ifname) != nullptr) g.netdev = ifname;
    p.gids.push_back(std::move(g));
  }
  return p;
}

Result<DeviceInfo> describe(ibv_context* ctx, const std::string& name) {
  ibv_device_attr attr{};
  if (int rc = ibv_query_device(ctx, &attr); rc != 0) return verbs_call_error("ibv_query_device", rc);
  DeviceInfo d;
  d.name = name;
  d.node_guid = attr.node_guid;
  for (std::uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
    WEFT_ASSIGN_OR_RETURN(PortInfo port, query_port(ctx, p, 0));
    d.ports.push_back(std::move(port));
  }
  return d;
}

}  // namespace

std::string GidEntry::ipv4() const { return ipv4_of(gid); }

std::string ipv4_of(const Gid& gid) {
  for (int i = 0; i < 10; ++i) {
    if (gid[i] != 0) return "";
  }
  if (gid[10] != 0xff || gid[11] != 0xff) return "";
  return fmt::format("{}.{}.{}.{}", gid[12], gid[13], gid[14], gid[15]);
}

std::uint32_t mtu_bytes(ibv_mtu mtu) {
  // enum ibv_mtu: IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5, i.e. 128 << value.
  return 128u << static_cast<unsigned>(mtu);
}

std::string_view port_state_name(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
  }
  return "UNKNOWN";
}

std::string format_gid(const Gid& gid) {
  std::string s;
  for (std::size_t i = 0; i < gid.size(); i += 2) {
    if (i > 0) s += ':';
    s += fmt::format("{:02x}{:02x}", gid[i], gid[i + 1]);
  }
  return s;
}

Result<GidEntry> select_gid(std::span<const GidEntry> gids, std::optional<std::uint32_t> override_index,
                            const std::string& ipv4) {
  if (override_index) {
    for (const GidEntry& g : gids) {
      if (g.index != *override_index) continue;
      if (g.type != GidType::kRoceV2) {
        return invalid_argument(fmt::format("GID index {} is not RoCE v2; weft needs UDP-encapsulated RoCE "
                                            "so that the source port steers ECMP",
                                            *override_index));
      }
      if (!ipv4.empty() && g.ipv4() != ipv4) {
        return invalid_argument(fmt::format("GID index {} maps {}, not the requested {}", *override_index,
                                            g.ipv4().empty() ? format_gid(g.gid) : g.ipv4(), ipv4));
      }
      return g;
    }
    return not_found(fmt::format("GID index {} is empty or out of the table ({} valid entries)",
                                 *override_index, gids.size()));
  }
  for (const GidEntry& g : gids) {
    if (g.type == GidType::kRoceV2 && !g.ipv4().empty() && (ipv4.empty() || g.ipv4() == ipv4)) return g;
  }
  if (!ipv4.empty()) return not_found(fmt::format("no RoCE v2 GID maps IPv4 address {}", ipv4));
  return not_found(fmt::format("no RoCE v2 IPv4-mapped GID among {} entries (is an IPv4 address "
                               "configured on the net device?)",
                               gids.size()));
}

Result<std::vector<DeviceInfo>> list_devices() {
  int n = 0;
  WEFT_ASSIGN_OR_RETURN(DeviceList list, get_device_list(&n));
  std::vector<DeviceInfo> out;
  for (int i = 0; i < n; ++i) {
    std::string name = ibv_get_device_name(list[i]);
    ContextHandle ctx(ibv_open_device(list[i]));
    if (!ctx) return verbs_errno_error("ibv_open_device").with_context(name);
    WEFT_ASSIGN_OR_RETURN(DeviceInfo d, describe(ctx.get(), name));
    out.push_back(std::move(d));
  }
  return out;
}

Result<Device> Device::open(const DeviceConfig& config) {
  if (config.port == 0) return invalid_argument("port 0 does not exist: verbs ports are numbered from 1");
  int n = 0;
  WEFT_ASSIGN_OR_RETURN(DeviceList list, get_device_list(&n));
  if (n == 0) return not_found("no RDMA devices found (is a provider such as rdma_rxe or mlx5 loaded?)");
  std::string tried;
  for (int i = 0; i < n; ++i) {
    std::string name = ibv_get_device_name(list[i]);
    if (!config.name.empty() && name != config.name) continue;
    Device d;
    d.ctx_ = ContextHandle(ibv_open_device(list[i]));
    if (!d.ctx_) return verbs_errno_error("ibv_open_device").with_context(name);
    auto port = query_port(d.ctx_.get(), config.port, 0);
    if (!port) return port.status().with_context(name);
    if (port->link_layer != IBV_LINK_LAYER_ETHERNET || port->state != IBV_PORT_ACTIVE) {
      std::string why = fmt::format("{} port {} is {}{}", name, config.port, port_state_name(port->state),
                                    port->link_layer == IBV_LINK_LAYER_ETHERNET ? "" : ", not Ethernet (RoCE)");
      if (!config.name.empty()) return failed_precondition(why);
      tried += (tried.empty() ? "" : "; ") + why;
      continue;
    }
    auto gid = select_gid(port->gids, config.gid_index, config.ipv4);
    if (!gid) {
      if (!config.name.empty()) return gid.status().with_context(fmt::format("{} port {}", name, config.port));
      tried += (tried.empty() ? "" : "; ") + fmt::format("{}: {}", name, gid.status().message());
      continue;
    }
    d.pd_ = PdHandle(ibv_alloc_pd(d.ctx_.get()));
    if (!d.pd_) return verbs_errno_error("ibv_alloc_pd").with_context(name);
    d.name_ = name;
    d.port_ = std::move(*port);
    d.gid_ = std::move(*gid);
#if WEFT_HAVE_MLX5DV
    d.mlx5_ = mlx5dv_is_supported(list[i]);
#endif
    return d;
  }
  if (!config.name.empty()) return not_found(fmt::format("no RDMA device named '{}'", config.name));
  return not_found(fmt::format("no usable RoCE v2 device: {}", tried));
}

Status Device::close() {
  CleanupErrors errors;
  errors.add(pd_.close());
  errors.add(ctx_.close());
  return errors.status();
}

}  // namespace weft::verbs
