// kAuto's cost model: the algorithms' steps (cost_model.h has the formulas
// and their source).
#include "cost_model.h"

#include <cmath>

#include "algorithms/algorithms.h"
#include "weft/routing/schedule.h"

namespace weft::coll::internal {
namespace {

using Groups = std::vector<std::vector<int>>;  // algorithms that run at once, each on its ranks
using Pairs = std::vector<std::pair<int, int>>;

// Sums the steps of one algorithm.
class Steps {
 public:
  explicit Steps(const ModelShape& s) : s_(s) {}
  // A step whose messages go between `pairs`: `k` messages of `m` bytes
  // each way per rank, `r` bytes reduced.
  void add(const Pairs& pairs, double k, double m, double r) {
    bool crosses = false;
    for (const auto& [a, b] : pairs) crosses = crosses || host(a) != host(b);
    const TransportCost& c = crosses ? *s_.net : *s_.local;
    us_ += k * c.message_us(m, s_.shared_cpus) + r * c.gamma_ns_per_byte * 1e-3;
  }
  int host(int rank) const { return s_.host_of[static_cast<size_t>(rank)]; }
  double us() const { return us_; }

 private:
  const ModelShape& s_;
  double us_ = 0;
};

// Butterfly (halving = false) or HD (true) in every group at once (the
// groups are of one size; g[i] is rank i of its algorithm) on m bytes.
void add_doubling(Steps& st, const Groups& groups, double m, bool halving) {
  const routing::HdLayout L = routing::hd_layout(static_cast<int>(groups.front().size()));
  Pairs fold;
  for (const auto& g : groups) {
    for (int i = 0; i < L.rem; ++i) fold.emplace_back(g[static_cast<size_t>(2 * i)], g[static_cast<size_t>(2 * i + 1)]);
  }
  auto at = [&](int d) {
    Pairs pairs;
    for (const auto& g : groups) {
      for (int v = 0; v < L.pof2; ++v) {
        if (v < (v ^ d)) pairs.emplace_back(g[static_cast<size_t>(L.rank_of(v))], g[static_cast<size_t>(L.rank_of(v ^ d))]);
      }
    }
    return pairs;
  };
  if (!fold.empty()) st.add(fold, 1, m, m);
  double part = m;
  for (int k = 0; k < L.log2_pof2(); ++k) {
    if (halving) part /= 2;
    st.add(at(1 << k), 1, part, part);
  }
  for (int k = L.log2_pof2() - 1; halving && k >= 0; --k, part *= 2) st.add(at(1 << k), 1, part, 0);
  if (!fold.empty()) st.add(fold, 1, m, 0);
}

// Ring reduce-scatter (reduce) or allgather in every group at once on m bytes.
void add_ring(Steps& st, const Groups& groups, double m, bool reduce) {
  Pairs next;
  for (const auto& g : groups) {
    for (size_t i = 0; i < g.size(); ++i) next.emplace_back(g[i], g[(i + 1) % g.size()]);
  }
  const double part = m / static_cast<double>(groups.front().size());
  for (size_t k = 0; k + 1 < groups.front().size(); ++k) st.add(next, 1, part, reduce ? part : 0);
}

double hd_us(const ModelShape& s, const Groups& all, double bytes) {
  Steps st(s);
  add_doubling(st, all, bytes, true);
  return st.us();
}

}  // namespace

double allreduce_us(Algorithm a, const ModelShape& s, double bytes) {
  const int p = static_cast<int>(s.host_of.size());
  if (p < 2) return 0;
  Groups all(1);
  for (int r = 0; r < p; ++r) all[0].push_back(r);
  Steps st(s);
  switch (a) {
    case Algorithm::kButterfly: add_doubling(st, all, bytes, false); break;
    case Algorithm::kHalvingDoubling: {
      // One whole HD per piece (algorithms/pieces.cc), the last one shorter.
      const auto piece = static_cast<double>(s.net->hd_piece_bytes);
      if (piece <= 0 || bytes <= piece) return hd_us(s, all, bytes);
      const double whole = std::floor(bytes / piece), rest = bytes - whole * piece;
      return whole * hd_us(s, all, piece) + (rest > 0 ? hd_us(s, all, rest) : 0);
    }
    case Algorithm::kRing:
      add_ring(st, all, bytes, true);
      add_ring(st, all, bytes, false);
      break;
    case Algorithm::kOneShot: {
      Pairs everyone;
      for (int r = 1; r < p; ++r) everyone.emplace_back(0, r);  // crosses iff some rank is on another host than 0
      st.add(everyone, p - 1, bytes, (p - 1) * bytes);
      break;
    }
    case Algorithm::kHybrid: {
      const Groups hosts = equal_hosts(s.host_of);
      const size_t l = hosts.front().size();
      Groups legs(l);  // local index i: rank i of every host
      for (const auto& h : hosts) {
        for (size_t i = 0; i < l; ++i) legs[i].push_back(h[i]);
      }
      const double share = bytes / static_cast<double>(l);
      add_ring(st, hosts, bytes, true);
      add_doubling(st, legs, share, true);
      add_ring(st, hosts, bytes, false);
      break;
    }
    default: return HUGE_VAL;
  }
  return st.us();
}

}  // namespace weft::coll::internal
