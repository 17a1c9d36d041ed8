#include "remap.h"

#include <set>

#include <fmt/format.h>

#include "weft/routing/schedule.h"

namespace weft::coll::internal {

std::vector<std::pair<int, int>> talking_pairs(Algorithm a, int n) {
  std::set<std::pair<int, int>> e;
  auto add = [&](int x, int y) {
    if (x != y) e.insert({std::min(x, y), std::max(x, y)});
  };
  if (a == Algorithm::kRing) {
    for (int r = 0; r < n; ++r) add(r, (r + 1) % n);
  } else if (a == Algorithm::kOneShot) {
    // Every rank talks to every other: no order avoids a failed link.
    for (int x = 0; x < n; ++x) {
      for (int y = x + 1; y < n; ++y) add(x, y);
    }
  } else {
    // HD and butterfly: MPICH's fold pairs, then v ^ 2^k among newranks.
    const routing::HdLayout L = routing::hd_layout(n);
    for (int i = 0; i < L.rem; ++i) add(2 * i, 2 * i + 1);
    for (int v = 0; v < L.pof2; ++v) {
      for (int k = 0; k < L.log2_pof2(); ++k) add(L.rank_of(v), L.rank_of(v ^ (1 << k)));
    }
  }
  return {e.begin(), e.end()};
}

namespace {

bool avoids(const std::vector<int>& map, const std::vector<std::pair<int, int>>& talk,
            const std::set<std::pair<int, int>>& bad) {
  for (auto [x, y] : talk) {
    int a = map[static_cast<size_t>(x)], b = map[static_cast<size_t>(y)];
    if (bad.count({std::min(a, b), std::max(a, b)})) return false;
  }
  return true;
}

struct Search {
  int n;
  std::vector<std::vector<int>> nbr;  // logical adjacency
  const std::set<std::pair<int, int>>* bad;
  std::vector<int> map;
  std::vector<bool> used;
  long budget = 2'000'000;

  bool ok(int logical, int phys) const {
    for (int m : nbr[static_cast<size_t>(logical)]) {
      if (m >= logical) continue;  // only the already-placed neighbours
      int q = map[static_cast<size_t>(m)];
      if (bad->count({std::min(phys, q), std::max(phys, q)})) return false;
    }
    return true;
  }
  bool place(int logical) {
    if (logical == n) return true;
    for (int p = 0; p < n; ++p) {
      if (used[static_cast<size_t>(p)] || --budget < 0) continue;
      if (!ok(logical, p)) continue;
      map[static_cast<size_t>(logical)] = p;
      used[static_cast<size_t>(p)] = true;
      if (place(logical + 1)) return true;
      used[static_cast<size_t>(p)] = false;
    }
    return false;
  }
};

}  // namespace

Result<std::vector<int>> remap_avoiding(Algorithm a, int n,
                                        const std::vector<std::pair<int, int>>& failed) {
  std::vector<int> map(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) map[static_cast<size_t>(i)] = i;
  if (failed.empty()) return map;
  std::set<std::pair<int, int>> bad;
  for (auto [x, y] : failed) bad.insert({std::min(x, y), std::max(x, y)});
  const auto talk = talking_pairs(a, n);
  for (int mirror = 0; mirror < 2; ++mirror) {
    for (int s = 0; s < n; ++s) {
      for (int i = 0; i < n; ++i) map[static_cast<size_t>(i)] = mirror ? (n - 1 - i + s) % n : (i + s) % n;
      if (avoids(map, talk, bad)) return map;
    }
  }
  Search srch{n, std::vector<std::vector<int>>(static_cast<size_t>(n)), &bad,
              std::vector<int>(static_cast<size_t>(n), -1), std::vector<bool>(static_cast<size_t>(n), false)};
  for (auto [x, y] : talk) {
    srch.nbr[static_cast<size_t>(x)].push_back(y);
    srch.nbr[static_cast<size_t>(y)].push_back(x);
  }
  if (srch.place(0)) return srch.map;
  return failed_precondition(fmt::format(
      "no order of {} ranks keeps {} allreduce off the {} failed link(s){}", n, algorithm_name(a),
      failed.size(), srch.budget < 0 ? " (search budget exhausted)" : ""));
}

}  // namespace weft::coll::internal
