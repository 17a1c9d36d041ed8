// Device and port discovery, and the choice of the RoCE v2 GID.
//
// On RoCE the GID index selects the source IP address and the RoCE version of
// every packet a QP sends. weft wants RoCE v2 (UDP/IPv4, the only kind ECMP
// can spread by source port) with an IPv4-mapped GID (::ffff:a.b.c.d), so it
// scans the port's GID table for that (ibv_query_gid_table(3)). The scan can
// be overridden by an explicit index or narrowed to one IPv4 address.
//
//   DeviceConfig cfg{.name = "rxe1"};
//   WEFT_ASSIGN_OR_RETURN(Device dev, Device::open(cfg));
//   dev.gid().ipv4;       // "10.78.0.1"
//   dev.port().active_mtu_bytes;  // 1024 on rxe over a 1500-byte veth
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/verbs/handle.h"

namespace weft::verbs {

using Gid = std::array<std::uint8_t, 16>;

enum class GidType { kIb, kRoceV1, kRoceV2 };

struct GidEntry {
  std::uint32_t index = 0;
  Gid gid{};
  GidType type = GidType::kIb;
  std::string netdev;  // "" when the entry has no net device
  // "a.b.c.d" when the GID is IPv4-mapped (::ffff:a.b.c.d), else "".
  std::string ipv4() const;
};

struct PortInfo {
  std::uint8_t port_num = 1;
  ibv_port_state state = IBV_PORT_NOP;
  ibv_mtu active_mtu = IBV_MTU_1024;
  std::uint32_t active_mtu_bytes = 1024;
  std::uint8_t link_layer = IBV_LINK_LAYER_UNSPECIFIED;
  std::uint32_t max_msg_bytes = 1u << 30;  // largest message one work request may carry
  std::vector<GidEntry> gids;  // every valid entry of the GID table
};

struct DeviceInfo {
  std::string name;  // "rxe1", "mlx5_0"
  std::uint64_t node_guid = 0;
  std::vector<PortInfo> ports;
};

// What to open. Invalid combinations are rejected by Device::open.
struct DeviceConfig {
  std::string name;            // "" = the first device with an active Ethernet port
  std::uint8_t port = 1;       // ports are numbered from 1
  std::optional<std::uint32_t> gid_index;  // overrides the scan
  std::string ipv4;            // "" = any; else the GID must map this address
};

// All devices and their ports; a device that cannot be queried is an error
// naming it (a half-listed fabric is worse than none).
Result<std::vector<DeviceInfo>> list_devices();

// The GID a QP should use: `override_index` if given (it must exist and be
// RoCE v2), else the lowest-index RoCE v2 IPv4-mapped entry, restricted to
// `ipv4` when that is non-empty. Pure: unit-tested without hardware.
Result<GidEntry> select_gid(std::span<const GidEntry> gids, std::optional<std::uint32_t> override_index,
                            const std::string& ipv4);

std::uint32_t mtu_bytes(ibv_mtu mtu);
// "a.b.c.d" when the GID is IPv4-mapped (::ffff:a.b.c.d), else "".
std::string ipv4_of(const Gid& gid);
std::string_view port_state_name(ibv_port_state state);
std::string format_gid(const Gid& gid);

// An open device: the context, a protection domain, the port and chosen GID.
class Device {
 public:
  static Result<Device> open(const DeviceConfig& config);

  ibv_context* context() const { return ctx_.get(); }
  ibv_pd* pd() const { return pd_.get(); }
  const std::string& name() const { return name_; }
  const PortInfo& port() const { return port_; }
  const GidEntry& gid() const { return gid_; }
  // Whether mlx5dv_modify_qp_udp_sport applies (built with it and an mlx5 device).
  bool has_mlx5_sport() const { return mlx5_; }

  // Destroys the protection domain, then closes the device; reports both.
  Status close();

 private:
  // Member order = reverse destruction order: the PD goes before the context.
  ContextHandle ctx_;
  PdHandle pd_;
  std::string name_;
  PortInfo port_;
  GidEntry gid_;
  bool mlx5_ = false;
};

}  // namespace weft::verbs
