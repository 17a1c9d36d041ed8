#include "weft/routing/route_assignment.h"

#include <algorithm>
#include <numeric>

namespace weft::routing {

RouteAssignment assign_routes(int n_links, std::span<const RouteChoice> flows, int max_passes) {
  std::vector<int> load(static_cast<size_t>(n_links), 0);
  RouteAssignment out;
  out.chosen.assign(flows.size(), -1);
  auto path = [&](size_t f, int c) { return flows[f].candidate(static_cast<size_t>(c)); };
  auto add = [&](size_t f, int c, int d) {
    for (int l : path(f, c)) load[static_cast<size_t>(l)] += d;
  };
  // The worst and total load on candidate c if flow f were added to it.
  auto cost = [&](size_t f, int c) {
    int worst = 0, total = 0;
    for (int l : path(f, c)) worst = std::max(worst, load[static_cast<size_t>(l)] + 1), total += load[static_cast<size_t>(l)];
    return std::pair{worst, total};
  };

  std::vector<size_t> order(flows.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return flows[a].size() < flows[b].size(); });
  for (size_t f : order) {
    int best = 0;
    auto best_cost = cost(f, 0);
    for (int c = 1; c < static_cast<int>(flows[f].size()); ++c) {
      auto k = cost(f, c);
      if (k < best_cost) best = c, best_cost = k;
    }
    out.chosen[f] = best;
    add(f, best, +1);
  }

  auto current_max = [&] { return load.empty() ? 0 : *std::max_element(load.begin(), load.end()); };
  for (int pass = 0; pass < max_passes; ++pass) {
    const int m = current_max();
    if (m <= 1) break;
    bool moved = false;
    for (size_t f : order) {
      const int cur = out.chosen[f];
      bool hot = false;
      for (int l : path(f, cur)) hot = hot || load[static_cast<size_t>(l)] >= m;
      if (!hot || flows[f].size() < 2) continue;
      add(f, cur, -1);
      int best = cur;
      auto best_cost = cost(f, cur);
      for (int c = 0; c < static_cast<int>(flows[f].size()); ++c) {
        auto k = cost(f, c);
        if (k.first < m && k < best_cost) best = c, best_cost = k;
      }
      out.chosen[f] = best;
      add(f, best, +1);
      moved = moved || best != cur;
    }
    if (!moved) break;
  }
  out.max_load = current_max();
  return out;
}

}  // namespace weft::routing
