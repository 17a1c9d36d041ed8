#include "verbs_env.h"

#include <cstdlib>
#include <fstream>

namespace weft::verbs::testing {

std::optional<VerbsEnv> verbs_env(std::string* why) {
  const char* devs = std::getenv("WEFT_VERBS_DEVICES");
  if (devs == nullptr || *devs == '\0') {
    const char* vm = std::getenv("WEFT_RDMA_VM_UNAVAILABLE");
    *why = vm != nullptr ? std::string(vm)
                         : "WEFT_VERBS_DEVICES is not set: run under `ctest -L rdma` (boots the soft-RoCE VM) "
                           "or name two RoCE devices, e.g. WEFT_VERBS_DEVICES=mlx5_0,mlx5_1";
    return std::nullopt;
  }
  std::string s = devs;
  auto comma = s.find(',');
  if (comma == std::string::npos) {
    *why = "WEFT_VERBS_DEVICES must name two devices, 'devA,devB'; got '" + s + "'";
    return std::nullopt;
  }
  return VerbsEnv{s.substr(0, comma), s.substr(comma + 1)};
}

DeviceConfig device_named(const std::string& name) {
  DeviceConfig d;
  d.name = name;
  return d;
}

ContextConfig context_on(const std::string& device, std::chrono::milliseconds timeout) {
  ContextConfig c;
  c.device.name = device;
  c.timeout = timeout;
  return c;
}

ConnectionConfig connection_to(const std::string& peer_name) {
  ConnectionConfig c;
  c.peer_name = peer_name;
  return c;
}

std::string netdev_of(const Device& dev) { return dev.gid().netdev; }

std::uint64_t netdev_bytes(const std::string& netdev) {
  std::uint64_t total = 0;
  for (const char* f : {"tx_bytes", "rx_bytes"}) {
    std::ifstream in("/sys/class/net/" + netdev + "/statistics/" + f);
    std::uint64_t v = 0;
    in >> v;
    total += v;
  }
  return total;
}

Result<ConnectedPair> connect_pair(const VerbsEnv& env, const std::vector<std::uint32_t>& sports_a,
                                   const std::vector<std::uint32_t>& sports_b, const ConnectionConfig& base,
                                   const CqConfig& cq) {
  ConnectedPair p;
  ContextConfig ca;
  ca.device.name = env.dev_a;
  ca.cq = cq;
  ca.timeout = std::chrono::milliseconds(20000);
  ContextConfig cb = ca;
  cb.device.name = env.dev_b;
  WEFT_ASSIGN_OR_RETURN(p.a, Context::open(ca));
  WEFT_ASSIGN_OR_RETURN(p.b, Context::open(cb));
  for (std::size_t i = 0; i < sports_a.size(); ++i) {
    ConnectionConfig x = base, y = base;
    x.qp.planned_sport = sports_a[i];
    x.peer_name = "b" + std::to_string(i);
    y.qp.planned_sport = sports_b[i];
    y.peer_name = "a" + std::to_string(i);
    WEFT_ASSIGN_OR_RETURN(auto xa, p.a->create_connection(x));
    WEFT_ASSIGN_OR_RETURN(auto yb, p.b->create_connection(y));
    WEFT_RETURN_IF_ERROR(xa->connect(yb->local_info()));
    WEFT_RETURN_IF_ERROR(yb->connect(xa->local_info()));
    p.ca.push_back(std::move(xa));
    p.cb.push_back(std::move(yb));
  }
  return p;
}

std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t m) {
  std::vector<std::uint8_t> v(n);
  std::uint32_t x = 2654435761u * (m + 1);
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v[i] = static_cast<std::uint8_t>(x);
  }
  return v;
}

}  // namespace weft::verbs::testing
