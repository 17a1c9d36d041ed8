// The model path table: an ECMP hash model walked over the topology.
#include <algorithm>
#include <span>
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

Result<Path> route_path(const PathFinder& pf, int src_nic, int dst_nic, std::span<const int> route) {
  return pf.route_via(src_nic, dst_nic, route);
}

namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A pseudo-random permutation of [0, n): a 4-round Feistel network over
// [0, 4^half) (4^half >= n), walking the cycle until the value falls inside
// [0, n) (Black & Rogaway, "Ciphers with arbitrary finite domains", 2002).
uint32_t feistel(uint32_t x, uint32_t n, int half, uint64_t key) {
  const uint32_t mask = (1u << half) - 1;
  do {
    uint32_t l = x >> half, r = x & mask;
    for (int round = 0; round < 4; ++round) {
      const auto k = static_cast<uint32_t>(key >> (16 * round));
      const uint32_t f = (((r ^ k) * 0x9E3779B1u) >> 13) & mask;
      const uint32_t next = l ^ f;
      l = r;
      r = next;
    }
    x = (l << half) | r;
  } while (x >= n);
  return x;
}

// FNV-1a over the switch indices (collisions are caught by comparing routes).
uint64_t route_key(const Route& r) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int s : r) h = (h ^ static_cast<uint32_t>(s)) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

class ModelPathTable final : public PathTable {
 public:
  ModelPathTable(const topo::Fabric& f, std::unique_ptr<EcmpHash> hash, uint32_t draw_seed)
      : f_(f), hash_(std::move(hash)), draw_seed_(draw_seed), pf_(f),
        hop_range_(f.switches.size() <= kFlatSwitches ? f.switches.size() * f.switches.size() : 0, {-1, -1}) {}

  std::string describe() const override { return fmt::format("model {}", hash_->name()); }
  const topo::Fabric& fabric() const override { return f_; }

  Result<Route> route(const FlowKey& k) override {
    WEFT_RETURN_IF_ERROR(check_pair(k.src_nic, k.dst_nic));
    WEFT_RETURN_IF_ERROR(reachable(k.src_nic, k.dst_nic));
    Route r;
    WEFT_RETURN_IF_ERROR(walk(FiveTuple{nic_ipv4(f_, k.src_nic), nic_ipv4(f_, k.dst_nic), k.proto, k.sport, k.dport},
                              k.src_nic, k.dst_nic, r));
    return r;
  }

  Status ports(const PairQuery& q, PortRange range, int max_ports, PairRoutes& out) override {
    out.clear();
    WEFT_RETURN_IF_ERROR(check_pair(q.src_nic, q.dst_nic));
    WEFT_RETURN_IF_ERROR(reachable(q.src_nic, q.dst_nic));
    const uint32_t n = range.size();
    if (n == 0 || max_ports <= 0) return Status::ok();
    const uint32_t want = std::min<uint32_t>(n, static_cast<uint32_t>(max_ports));
    // Ports lo + perm(i), i < want, for a pseudo-random permutation of
    // [0, n) keyed by the pair: a random draw without repeats. (An
    // arithmetic progression of ports is a poor sample for a CRC: the CRC
    // is linear over GF(2), and the progression's images bunch on a few
    // next hops.)
    const uint64_t pair_key = mix64((static_cast<uint64_t>(static_cast<uint32_t>(q.src_nic)) << 32) ^
                               static_cast<uint32_t>(q.dst_nic) ^ (static_cast<uint64_t>(draw_seed_) << 20) ^
                               (static_cast<uint64_t>(q.dport) << 48) ^ q.proto);
    int half = 1;
    while ((1u << (2 * half)) < n) ++half;
    auto perm = [&](uint32_t x) { return want < n ? feistel(x, n, half, pair_key) : x; };
    FiveTuple t{nic_ipv4(f_, q.src_nic), nic_ipv4(f_, q.dst_nic), q.proto, 0, q.dport};
    // Distinct routes through a small open-addressing table (route hash ->
    // index), reused across calls: a generation number marks live slots, so
    // nothing is cleared per pair.
    size_t cap = 16;
    while (cap < 2 * static_cast<size_t>(want)) cap *= 2;
    if (slots_.size() < cap) slots_.assign(cap, Slot{});
    if (++gen_ == 0) {  // wrapped: forget every slot once
      std::fill(slots_.begin(), slots_.end(), Slot{});
      gen_ = 1;
    }
    out.ports.reserve(want);
    out.hops.reserve(4 * static_cast<size_t>(want));
    out.ends.reserve(want);
    for (uint32_t i = 0; i < want; ++i) {
      t.sport = static_cast<uint16_t>(range.lo + perm(i));
      WEFT_RETURN_IF_ERROR(walk(t, q.src_nic, q.dst_nic, r_));
      const uint64_t key = route_key(r_);
      size_t at = key & (cap - 1);
      while (slots_[at].gen == gen_ && slots_[at].key != key) at = (at + 1) & (cap - 1);
      Slot& sl = slots_[at];
      if (sl.gen != gen_) {
        sl = {key, out.add_route(r_), gen_};
      } else if (!std::equal(r_.begin(), r_.end(), out.route(static_cast<size_t>(sl.route)).begin(),
                             out.route(static_cast<size_t>(sl.route)).end())) {
        return internal_error("route hash collision in the model path table");
      }
      out.ports.push_back({t.sport, sl.route});
    }
    return Status::ok();
  }

 private:
  Status check_pair(int s, int d) const {
    const int n = static_cast<int>(f_.nics.size());
    if (s < 0 || s >= n || d < 0 || d >= n) return invalid_argument(fmt::format("NIC index {} -> {} is not in the fabric", s, d));
    if (s == d) return invalid_argument(fmt::format("flow from {} to itself", f_.nic_qualified_name(s)));
    return Status::ok();
  }

  // Shortest-path next switches of (sw, dst) in PathFinder::next_hops order,
  // computed once: [begin, end) ranges into one pool.
  std::span<const int> hops(int sw, int dst) {
    const size_t at = static_cast<size_t>(sw) * f_.switches.size() + static_cast<size_t>(dst);
    auto& h = hop_range_.empty() ? hop_map_[at] : hop_range_[at];
    if (h.first < 0) {
      auto v = pf_.next_hops(sw, dst);
      h = {static_cast<int32_t>(hop_pool_.size()), static_cast<int32_t>(hop_pool_.size() + v.size())};
      for (int dl : v) hop_pool_.push_back(f_.vertex_switch(f_.directed_dst(dl)));
    }
    return {hop_pool_.data() + h.first, static_cast<size_t>(h.second - h.first)};
  }

  Status reachable(int s, int d) {
    const int a = f_.nic_switch(s), b = f_.nic_switch(d);
    if (a == b || pf_.distance(a, b) >= 0) return Status::ok();
    return unavailable(fmt::format("no path {} -> {}: '{}' cannot reach '{}' over links that are up",
                                   f_.nic_qualified_name(s), f_.nic_qualified_name(d), f_.switches[a].name,
                                   f_.switches[b].name));
  }

  // The switches tuple t crosses from NIC s to NIC d, into r (reachable).
  Status walk(const FiveTuple& t, int s, int d, Route& r) {
    r.clear();
    int sw = f_.nic_switch(s);
    const int dst = f_.nic_switch(d);
    r.push_back(sw);
    while (sw != dst) {
      const auto h = hops(sw, dst);
      const size_t pick = h.size() == 1 ? 0 : hash_->pick(t, sw, h.size());
      sw = h[pick];
      r.push_back(sw);
    }
    return Status::ok();
  }

  const topo::Fabric& f_;
  std::unique_ptr<EcmpHash> hash_;
  uint32_t draw_seed_;
  PathFinder pf_;
  // Up to kFlatSwitches switches the table is flat (32 MB at 2,048); a
  // larger fabric (a 65,536-endpoint 3-tier has ~5,000) keeps the pairs it
  // meets in a hash map.
  static constexpr size_t kFlatSwitches = 2048;
  std::vector<std::pair<int32_t, int32_t>> hop_range_;
  struct HopRange : std::pair<int32_t, int32_t> {
    HopRange() : std::pair<int32_t, int32_t>(-1, -1) {}
  };
  std::unordered_map<size_t, HopRange> hop_map_;
  std::vector<int> hop_pool_;
  struct Slot {
    uint64_t key = 0;
    int route = 0;
    uint32_t gen = 0;
  };
  std::vector<Slot> slots_;
  uint32_t gen_ = 0;
  Route r_;
};

}  // namespace

std::unique_ptr<PathTable> make_model_path_table(const topo::Fabric& f, std::unique_ptr<EcmpHash> hash,
                                                 uint32_t draw_seed) {
  return std::make_unique<ModelPathTable>(f, std::move(hash), draw_seed);
}

}  // namespace weft::routing
