// The model path table: an ECMP hash model walked over the topology.
#include <algorithm>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>

#include "weft/routing/path_table.h"
#include "weft/routing/router.h"

namespace weft::routing {

Result<PortRange> make_port_range(int lo, int hi) {
  if (lo < 1 || hi > 65535 || lo > 65535 || hi < 1) {
    return invalid_argument(fmt::format("port range {}-{} is outside 1-65535", lo, hi));
  }
  if (lo > hi) return invalid_argument(fmt::format("port range {}-{} is empty (low end above high end)", lo, hi));
  return PortRange{static_cast<uint16_t>(lo), static_cast<uint16_t>(hi)};
}

Result<Path> route_path(const PathFinder& pf, int src_nic, int dst_nic, const Route& route) {
  return pf.route_via(src_nic, dst_nic, route);
}

namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t route_key(const Route& r) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int s : r) h = mix64(h ^ static_cast<uint32_t>(s));
  return h;
}

class ModelPathTable final : public PathTable {
 public:
  ModelPathTable(const topo::Fabric& f, std::unique_ptr<EcmpHash> hash, uint32_t draw_seed)
      : f_(f), hash_(std::move(hash)), draw_seed_(draw_seed), pf_(f) {}

  std::string describe() const override { return fmt::format("model {}", hash_->name()); }
  const topo::Fabric& fabric() const override { return f_; }

  Result<Route> route(const FlowKey& k) override {
    WEFT_RETURN_IF_ERROR(check_pair(k.src_nic, k.dst_nic));
    Route r;
    WEFT_RETURN_IF_ERROR(walk(FiveTuple{nic_ipv4(f_, k.src_nic), nic_ipv4(f_, k.dst_nic), k.proto, k.sport, k.dport},
                              k.src_nic, k.dst_nic, r));
    return r;
  }

  Result<PairRoutes> ports(const PairQuery& q, PortRange range, int max_ports) override {
    WEFT_RETURN_IF_ERROR(check_pair(q.src_nic, q.dst_nic));
    PairRoutes out;
    const uint32_t n = range.size();
    if (n == 0 || max_ports <= 0) return out;
    const uint32_t want = std::min<uint32_t>(n, static_cast<uint32_t>(max_ports));
    // Ports lo + (start + i * stride) mod n, i < want: distinct because the
    // stride is coprime with n.
    uint32_t start = 0, stride = 1;
    if (want < n) {
      const uint64_t h = mix64((static_cast<uint64_t>(static_cast<uint32_t>(q.src_nic)) << 32) ^
                               static_cast<uint32_t>(q.dst_nic) ^ (static_cast<uint64_t>(draw_seed_) << 20) ^
                               (static_cast<uint64_t>(q.dport) << 48) ^ q.proto);
      start = static_cast<uint32_t>(h % n);
      stride = static_cast<uint32_t>((h >> 32) % n) | 1u;
      while (std::gcd(stride, n) != 1) stride += 2;
    }
    FiveTuple t{nic_ipv4(f_, q.src_nic), nic_ipv4(f_, q.dst_nic), q.proto, 0, q.dport};
    std::unordered_map<uint64_t, int> seen;
    Route r;
    out.ports.reserve(want);
    for (uint32_t i = 0; i < want; ++i) {
      t.sport = static_cast<uint16_t>(range.lo + (start + static_cast<uint64_t>(i) * stride) % n);
      WEFT_RETURN_IF_ERROR(walk(t, q.src_nic, q.dst_nic, r));
      auto [it, fresh] = seen.emplace(route_key(r), static_cast<int>(out.routes.size()));
      if (fresh) {
        out.routes.push_back(r);
      } else if (out.routes[static_cast<size_t>(it->second)] != r) {
        return internal_error("route hash collision in the model path table");
      }
      out.ports.push_back({t.sport, it->second});
    }
    std::sort(out.ports.begin(), out.ports.end(), [](const PortRoute& a, const PortRoute& b) { return a.sport < b.sport; });
    return out;
  }

 private:
  Status check_pair(int s, int d) const {
    const int n = static_cast<int>(f_.nics.size());
    if (s < 0 || s >= n || d < 0 || d >= n) return invalid_argument(fmt::format("NIC index {} -> {} is not in the fabric", s, d));
    if (s == d) return invalid_argument(fmt::format("flow from {} to itself", f_.nic_qualified_name(s)));
    return Status::ok();
  }

  const std::vector<int>& hops(int sw, int dst) {
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(sw)) << 32) | static_cast<uint32_t>(dst);
    auto it = hops_.find(key);
    if (it == hops_.end()) it = hops_.emplace(key, pf_.next_hops(sw, dst)).first;
    return it->second;
  }

  // The switches tuple t crosses from NIC s to NIC d, into r.
  Status walk(const FiveTuple& t, int s, int d, Route& r) {
    r.clear();
    int sw = f_.nic_switch(s);
    const int dst = f_.nic_switch(d);
    r.push_back(sw);
    if (sw != dst && pf_.distance(sw, dst) < 0) {
      return unavailable(fmt::format("no path {} -> {}: '{}' cannot reach '{}' over links that are up",
                                     f_.nic_qualified_name(s), f_.nic_qualified_name(d), f_.switches[sw].name,
                                     f_.switches[dst].name));
    }
    while (sw != dst) {
      const auto& h = hops(sw, dst);
      const size_t pick = h.size() == 1 ? 0 : hash_->pick(t, sw, h.size());
      sw = f_.vertex_switch(f_.directed_dst(h[pick]));
      r.push_back(sw);
    }
    return Status::ok();
  }

  const topo::Fabric& f_;
  std::unique_ptr<EcmpHash> hash_;
  uint32_t draw_seed_;
  PathFinder pf_;
  std::unordered_map<uint64_t, std::vector<int>> hops_;
};

}  // namespace

std::unique_ptr<PathTable> make_model_path_table(const topo::Fabric& f, std::unique_ptr<EcmpHash> hash,
                                                 uint32_t draw_seed) {
  return std::make_unique<ModelPathTable>(f, std::move(hash), draw_seed);
}

}  // namespace weft::routing
