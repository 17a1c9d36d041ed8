#include "weft/routing/max_min.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>

namespace weft::routing {

MaxMinFair::MaxMinFair(std::vector<double> capacity)
    : capacity_(std::move(capacity)), left_(capacity_.size(), 0), unfrozen_(capacity_.size(), 0) {}

// Progressive filling with a heap of the levels at which links fill: a link
// with residual r at level b and k unfrozen flows fills at b + r / k. Pop
// the lowest; its unfrozen flows freeze at that level, and every other link
// they cross is brought up to the level and re-queued with one flow fewer.
// O((flows x hops + links) log links) per solve, instead of scanning every
// flow once per distinct rate.
const std::vector<double>& MaxMinFair::solve(std::span<const std::vector<int>> paths, std::span<const char> active) {
  const size_t n = paths.size();
  rate_.assign(n, 0.0);
  frozen_.assign(n, 1);
  used_.clear();
  base_.resize(capacity_.size());
  version_.resize(capacity_.size());
  queued_.resize(capacity_.size());
  start_.resize(capacity_.size() + 1);
  for (size_t i = 0; i < n; ++i) {
    if (!active[i] || paths[i].empty()) continue;
    frozen_[i] = 0;
    for (int l : paths[i]) {
      if (unfrozen_[static_cast<size_t>(l)]++ == 0) used_.push_back(l);
    }
  }
  // Flows per link (CSR over the links in use).
  size_t total = 0;
  for (int l : used_) {
    start_[static_cast<size_t>(l)] = total;
    total += static_cast<size_t>(unfrozen_[static_cast<size_t>(l)]);
  }
  on_link_.resize(total);
  fill_ = start_;
  for (size_t i = 0; i < n; ++i) {
    if (frozen_[i]) continue;
    for (int l : paths[i]) on_link_[fill_[static_cast<size_t>(l)]++] = static_cast<int>(i);
  }
  using Entry = std::tuple<double, int, unsigned>;  // (fill level, link, version)
  std::vector<Entry> entries;
  entries.reserve(used_.size());
  for (int l : used_) {
    const size_t u = static_cast<size_t>(l);
    left_[u] = capacity_[u];
    base_[u] = 0;
    ++version_[u];
    entries.emplace_back(left_[u] / unfrozen_[u], l, version_[u]);
  }
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap(std::greater<>{}, std::move(entries));
  std::vector<int>& touched = touched_;
  while (!heap.empty()) {
    // Every link that fills at this level (ties within rounding) at once, so
    // a step whose flows all get the same rate takes one round.
    const double level = std::get<0>(heap.top());
    touched.clear();
    while (!heap.empty() && std::get<0>(heap.top()) <= level * (1 + 1e-12)) {
      const auto [lv, l, ver] = heap.top();
      heap.pop();
      const size_t u = static_cast<size_t>(l);
      if (ver != version_[u] || unfrozen_[u] == 0) continue;  // stale entry
      for (size_t k = start_[u]; k < fill_[u]; ++k) {
        const size_t f = static_cast<size_t>(on_link_[k]);
        if (frozen_[f]) continue;
        frozen_[f] = 1;
        rate_[f] = level;
        for (int m : paths[f]) {
          const size_t v = static_cast<size_t>(m);
          left_[v] = std::max(0.0, left_[v] - (level - base_[v]) * unfrozen_[v]);
          base_[v] = level;
          --unfrozen_[v];
          ++version_[v];
          if (unfrozen_[v] > 0) touched.push_back(m);
        }
      }
    }
    // Re-queue each link the round changed, once, at its new fill level.
    ++round_;
    for (int m : touched) {
      const size_t v = static_cast<size_t>(m);
      if (unfrozen_[v] == 0 || queued_[v] == round_) continue;
      queued_[v] = round_;
      heap.emplace(base_[v] + left_[v] / unfrozen_[v], m, version_[v]);
    }
  }
  for (int l : used_) unfrozen_[static_cast<size_t>(l)] = 0;
  return rate_;
}

}  // namespace weft::routing
