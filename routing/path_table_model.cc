// The model path table: an ECMP hash model walked over the topology.
#include <algorithm>
#include <span>

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
// Applied to 0..want-1 at once: the rounds are straight-line code the
// compiler vectorises, and only values outside [0, n) walk on (none when n is
// a power of 4, as for the default range's 16,384 ports). Also built for
// AVX2 (picked at load time, GCC's target_clones), whose 32-bit lane
// multiply baseline x86-64 lacks: a planner draws ports for ~10^6 pairs.
[[gnu::target_clones("avx2", "default")]] void feistel_first(std::span<uint16_t> out, uint32_t n, int half,
                                                             uint64_t key, uint16_t lo, std::vector<uint32_t>& v) {
  const uint32_t mask = (1u << half) - 1;
  const auto k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 16);
  const auto k2 = static_cast<uint32_t>(key >> 32), k3 = static_cast<uint32_t>(key >> 48);
  auto rounds = [&](uint32_t x) {
    uint32_t l = x >> half, r = x & mask;
    for (uint32_t k : {k0, k1, k2, k3}) {
      const uint32_t next = l ^ ((((r ^ k) * 0x9E3779B1u) >> 13) & mask);
      l = r;
      r = next;
    }
    return (l << half) | r;
  };
  v.resize(out.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = rounds(static_cast<uint32_t>(i));
  for (size_t i = 0; i < v.size(); ++i) {
    while (v[i] >= n) v[i] = rounds(v[i]);
    out[i] = static_cast<uint16_t>(lo + v[i]);
  }
}

class ModelPathTable final : public PathTable {
 public:
  ModelPathTable(const topo::Fabric& f, std::unique_ptr<EcmpHash> hash, uint32_t draw_seed)
      : f_(f), hash_(std::move(hash)), draw_seed_(draw_seed), pf_(f), hop_rows_(f.switches.size()) {}

  std::string describe() const override { return fmt::format("model {}", hash_->name()); }
  bool hashes_qpn() const override { return hash_->hashes_qpn(); }
  const topo::Fabric& fabric() const override { return f_; }

  Result<Route> route(const FlowKey& k) override {
    WEFT_RETURN_IF_ERROR(check_pair(k.src_nic, k.dst_nic));
    WEFT_RETURN_IF_ERROR(reachable(k.src_nic, k.dst_nic));
    Route r;
    WEFT_RETURN_IF_ERROR(walk(FiveTuple{nic_ipv4(f_, k.src_nic), nic_ipv4(f_, k.dst_nic), k.proto, k.sport, k.dport,
                                        k.dqpn},
                              k.src_nic, k.dst_nic, r));
    return r;
  }

  Status ports(const PairQuery& q, PortRange range, int max_ports, PairRoutes& out) override {
    out.clear();
    WEFT_RETURN_IF_ERROR(check_pair(q.src_nic, q.dst_nic));
    WEFT_ASSIGN_OR_RETURN(const int hops_to_dst, reachable(q.src_nic, q.dst_nic));
    const uint32_t n = range.size();
    if (n == 0 || max_ports <= 0) return ok_status();
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
    sports_.resize(want);
    if (want < n) {
      feistel_first(sports_, n, half, pair_key, range.lo, perm_);
    } else {
      for (uint32_t i = 0; i < want; ++i) sports_[i] = static_cast<uint16_t>(range.lo + i);
    }
    // E-ECMP: the i-th port goes with one of the pair's QPNs, in turn (path_table.h).
    const bool qpn = hash_->hashes_qpn() && !q.dqpns.empty();
    if (qpn && q.dqpns.size() > 65536) {
      return invalid_argument(fmt::format("{} destination QPNs for one pair: at most 65536", q.dqpns.size()));
    }
    dqpns_.resize(qpn ? want : 0);
    qpn_at_.resize(qpn ? want : 0);
    // Starting at a QPN keyed by the pair, so that the first choices of the
    // pairs into one rank do not all name its first QPN.
    for (size_t i = 0; i < dqpns_.size(); ++i) {
      qpn_at_[i] = static_cast<uint16_t>((i + pair_key) % q.dqpns.size());
      dqpns_[i] = q.dqpns[qpn_at_[i]];
    }
    const FiveTuple t{nic_ipv4(f_, q.src_nic), nic_ipv4(f_, q.dst_nic), q.proto, 0, q.dport};
    walk_all(t, f_.nic_switch(q.src_nic), f_.nic_switch(q.dst_nic), hops_to_dst);
    // Written in place (no push_back: its by-value PortRoute went through
    // the stack and stalled on store forwarding once per port).
    out.ports.resize(want);
    out.hops.resize(static_cast<size_t>(len_) * want);
    out.ends.resize(want);
    PortRoute* op = out.ports.data();
    int* hop = out.hops.data();
    uint32_t routes = 0;
    // Distinct routes, numbered in order of first appearance, through a
    // table reused across calls: a generation number marks live slots, so
    // nothing is cleared per pair. Direct by route number where walk_all
    // numbered them (2 and 3 tiers); else open addressing by route hash.
    if (++gen_ == 0) {  // wrapped: forget every slot once
      std::fill(slots_.begin(), slots_.end(), Slot{});
      gen_ = 1;
    }
    auto add = [&](uint32_t i, Slot& sl, uint64_t key) {
      int* r = hop + static_cast<size_t>(routes) * static_cast<size_t>(len_);
      for (int l = 0; l < len_; ++l) r[l] = at_[static_cast<size_t>(l) * want + i];
      out.ends[routes] = (routes + 1) * static_cast<uint32_t>(len_);
      sl = {key, static_cast<int>(routes++), gen_};
    };
    if (code_space_ != 0) {
      if (slots_.size() < kDirectRoutes) slots_.resize(kDirectRoutes);
      for (uint32_t i = 0; i < want; ++i) {
        Slot& sl = slots_[codes_[i]];
        if (sl.gen != gen_) add(i, sl, codes_[i]);
        op[i] = {.sport = sports_[i], .qpn = qpn ? qpn_at_[i] : uint16_t{0}, .route = sl.route};
      }
    } else {
      route_keys();
      size_t cap = 16;
      while (cap < 2 * static_cast<size_t>(want)) cap *= 2;
      if (slots_.size() < cap) slots_.resize(cap);
      for (uint32_t i = 0; i < want; ++i) {
        const uint64_t key = keys_[i];
        size_t at = key & (cap - 1);
        while (slots_[at].gen == gen_ && slots_[at].key != key) at = (at + 1) & (cap - 1);
        Slot& sl = slots_[at];
        if (sl.gen != gen_) {
          add(i, sl, key);
        } else {
          const int* known = hop + static_cast<size_t>(sl.route) * static_cast<size_t>(len_);
          for (int l = 0; l < len_; ++l) {
            if (known[l] != at_[static_cast<size_t>(l) * want + i]) {
              out.clear();
              return internal_error("route hash collision in the model path table");
            }
          }
        }
        op[i] = {.sport = sports_[i], .qpn = qpn ? qpn_at_[i] : uint16_t{0}, .route = sl.route};
      }
    }
    out.hops.resize(static_cast<size_t>(routes) * static_cast<size_t>(len_));
    out.ends.resize(routes);
    return ok_status();
  }

 private:
  Status check_pair(int s, int d) const {
    const int n = static_cast<int>(f_.nics.size());
    if (s < 0 || s >= n || d < 0 || d >= n) return invalid_argument(fmt::format("NIC index {} -> {} is not in the fabric", s, d));
    if (s == d) return invalid_argument(fmt::format("flow from {} to itself", f_.nic_qualified_name(s)));
    return ok_status();
  }

  // Shortest-path next switches of (sw, dst) in PathFinder::next_hops order,
  // computed once: [begin, end) ranges into one pool, in one row per
  // destination switch (made when a pair first heads there: destinations
  // are leaves, 512 rows of 1,280 switches at 65,536 endpoints on 3 tiers),
  // so a look-up is two array reads.
  using HopRow = std::vector<std::pair<int32_t, int32_t>>;
  HopRow* hop_row(int dst) {
    auto& row = hop_rows_[static_cast<size_t>(dst)];
    if (row.empty()) row.assign(f_.switches.size(), {-1, -1});
    return &row;
  }
  std::span<const int> hops(HopRow* row, int sw, int dst) {
    auto& h = (*row)[static_cast<size_t>(sw)];
    if (h.first < 0) {
      auto v = pf_.next_hops(sw, dst);
      h = {static_cast<int32_t>(hop_pool_.size()), static_cast<int32_t>(hop_pool_.size() + v.size())};
      for (int dl : v) hop_pool_.push_back(f_.vertex_switch(f_.directed_dst(dl)));
    }
    return {hop_pool_.data() + h.first, static_cast<size_t>(h.second - h.first)};
  }
  std::span<const int> hops(int sw, int dst) { return hops(hop_row(dst), sw, dst); }

  // Switch hops from s's leaf to d's (0 on one leaf), or Unavailable.
  Result<int> reachable(int s, int d) {
    const int a = f_.nic_switch(s), b = f_.nic_switch(d);
    if (a == b) return 0;
    if (const int hops = pf_.distance(a, b); hops >= 0) return hops;
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
    return ok_status();
  }

  // walk() for every port in sports_ at once, one tier at a time (shortest
  // paths: every route of a pair has distance + 1 switches). A port on a
  // switch with one next hop takes it; the ports on switches with several
  // are hashed in one call per tier (pick_tier), which shares the pair's
  // hash state. Leaves the routes as the columns of at_ (len_ rows of
  // sports_.size()) and, while code_space_ is not 0, each route's number
  // below code_space_ in codes_.
  void walk_all(const FiveTuple& t, int src, int dst, int hops_to_dst) {
    const size_t n = sports_.size();
    len_ = hops_to_dst + 1;
    at_.resize(static_cast<size_t>(len_) * n);
    picks_.resize(n);
    tier_pick_.resize(n);
    hashed_.resize(n);
    h_sw_.resize(n);
    h_n_.resize(n);
    h_at_.resize(n);
    g_sports_.resize(n);
    g_dqpns_.resize(dqpns_.size());
    codes_.assign(n, 0);
    code_space_ = 1;
    std::fill(at_.begin(), at_.begin() + static_cast<std::ptrdiff_t>(n), src);
    HopRow& row = *hop_row(dst);
    for (int l = 1; l < len_; ++l) {
      const int* prev = at_.data() + static_cast<size_t>(l - 1) * n;
      int* cur = at_.data() + static_cast<size_t>(l) * n;
      uint32_t radix = 1, nh = 0;
      for (size_t i = 0; i < n; ++i) {
        if (row[static_cast<size_t>(prev[i])].first < 0) hops(&row, prev[i], dst);  // not empty: on a shortest path
        const auto [b, e] = row[static_cast<size_t>(prev[i])];
        radix = std::max(radix, static_cast<uint32_t>(e - b));
        tier_pick_[i] = 0;
        if (e - b == 1) {
          cur[i] = hop_pool_[static_cast<size_t>(b)];
        } else {
          hashed_[nh++] = static_cast<uint32_t>(i);
        }
      }
      if (nh > 0) pick_tier(t, prev, cur, nh, row);
      // A route is its sequence of picks (the next hops of a switch are
      // distinct), numbered in mixed radix while the numbers stay small.
      const uint64_t space = uint64_t{code_space_} * radix;
      code_space_ = space <= kDirectRoutes ? static_cast<uint32_t>(space) : 0;
      if (code_space_ != 0) {
        for (size_t i = 0; i < n; ++i) codes_[i] = codes_[i] * radix + tier_pick_[i];
      }
    }
  }

  // The hashed ports of a tier (hashed_[0, nh)): one pick_sports() call
  // when they all sit on one switch (the source leaf), else one pick_each()
  // over their (switch, next hops, port); fills cur and tier_pick_.
  void pick_tier(const FiveTuple& t, const int* prev, int* cur, uint32_t nh, const HopRow& row) {
    const uint32_t* hashed = hashed_.data();
    const size_t n = sports_.size();
    if (nh == n && std::all_of(prev, prev + n, [&](int sw) { return sw == prev[0]; })) {
      const auto [b, e] = row[static_cast<size_t>(prev[0])];
      const int* hop = hop_pool_.data() + b;
      hash_->pick_sports(t, prev[0], static_cast<size_t>(e - b), sports_, picks_, dqpns_);
      for (size_t i = 0; i < n; ++i) cur[i] = hop[picks_[i]], tier_pick_[i] = picks_[i];
      return;
    }
    for (uint32_t k = 0; k < nh; ++k) {
      const auto i = hashed[k];
      const auto [b, e] = row[static_cast<size_t>(prev[i])];
      h_sw_[k] = prev[i], h_n_[k] = static_cast<uint16_t>(e - b), h_at_[k] = b;
      g_sports_[k] = sports_[i];
      if (!dqpns_.empty()) g_dqpns_[k] = dqpns_[i];
    }
    std::span<const uint32_t> q;
    if (!dqpns_.empty()) q = {g_dqpns_.data(), nh};
    hash_->pick_each(t, {h_sw_.data(), nh}, {h_n_.data(), nh}, {g_sports_.data(), nh}, {picks_.data(), nh}, q);
    for (uint32_t k = 0; k < nh; ++k) {
      cur[hashed[k]] = hop_pool_[static_cast<size_t>(h_at_[k] + picks_[k])], tier_pick_[hashed[k]] = picks_[k];
    }
  }

  // An FNV-1a key of each route (the columns of at_), into keys_.
  void route_keys() {
    const size_t n = sports_.size();
    keys_.assign(n, kFnvOffset);
    for (int l = 0; l < len_; ++l) {
      const int* sw = at_.data() + static_cast<size_t>(l) * n;
      for (size_t i = 0; i < n; ++i) keys_[i] = (keys_[i] ^ static_cast<uint32_t>(sw[i])) * kFnvPrime;
    }
    for (auto& k : keys_) k ^= k >> 29;
  }

  static constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull, kFnvPrime = 0x100000001b3ull;

  const topo::Fabric& f_;
  std::unique_ptr<EcmpHash> hash_;
  uint32_t draw_seed_;
  PathFinder pf_;
  std::vector<HopRow> hop_rows_;  // [dst][sw] (hops())
  std::vector<int> hop_pool_;
  struct Slot {
    uint64_t key = 0;
    int route = 0;
    uint32_t gen = 0;
  };
  std::vector<Slot> slots_;
  uint32_t gen_ = 0;
  // walk_all's buffers, reused across calls.
  std::vector<uint16_t> sports_, picks_;
  std::vector<uint32_t> dqpns_;   // parallel to sports_ (E-ECMP), else empty
  std::vector<uint16_t> qpn_at_;  // their indices in the query's dqpns
  std::vector<uint32_t> perm_;
  std::vector<int> at_;
  std::vector<uint64_t> keys_;    // route_keys()
  std::vector<uint32_t> codes_;   // route numbers (walk_all)
  uint32_t code_space_ = 0;       // codes_ < code_space_; 0: not numbered
  static constexpr uint32_t kDirectRoutes = 4096;
  std::vector<uint32_t> hashed_;      // the ports of a tier whose switch has several next hops
  std::vector<int> h_sw_;             // per hashed port: its switch,
  std::vector<uint16_t> h_n_;         // its next hops
  std::vector<int32_t> h_at_;         // and where they start in hop_pool_
  std::vector<uint16_t> tier_pick_;   // per port: its pick at this tier (0: one next hop)
  std::vector<uint16_t> g_sports_;
  std::vector<uint32_t> g_dqpns_;
  int len_ = 0;
};

}  // namespace

std::unique_ptr<PathTable> make_model_path_table(const topo::Fabric& f, std::unique_ptr<EcmpHash> hash,
                                                 uint32_t draw_seed) {
  return std::make_unique<ModelPathTable>(f, std::move(hash), draw_seed);
}

}  // namespace weft::routing
