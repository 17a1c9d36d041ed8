#include "weft/routing/max_min.h"

#include <algorithm>
#include <limits>

namespace weft::routing {

MaxMinFair::MaxMinFair(std::vector<double> capacity)
    : capacity_(std::move(capacity)), left_(capacity_.size(), 0), unfrozen_(capacity_.size(), 0) {}

const std::vector<double>& MaxMinFair::solve(std::span<const std::vector<int>> paths, std::span<const char> active) {
  const size_t n = paths.size();
  rate_.assign(n, 0.0);
  frozen_.assign(n, 1);
  used_.clear();
  size_t remaining = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!active[i] || paths[i].empty()) continue;
    frozen_[i] = 0;
    ++remaining;
    for (int l : paths[i]) {
      if (unfrozen_[static_cast<size_t>(l)]++ == 0) {
        used_.push_back(l);
        left_[static_cast<size_t>(l)] = capacity_[static_cast<size_t>(l)];
      }
    }
  }
  double level = 0;  // the common rate of every unfrozen flow
  while (remaining > 0) {
    // The next link to fill: the smallest residual share.
    double step = std::numeric_limits<double>::infinity();
    for (int l : used_) {
      const int k = unfrozen_[static_cast<size_t>(l)];
      if (k > 0) step = std::min(step, left_[static_cast<size_t>(l)] / k);
    }
    level += step;
    for (int l : used_) {
      const int k = unfrozen_[static_cast<size_t>(l)];
      if (k > 0) left_[static_cast<size_t>(l)] -= step * k;
    }
    // Freeze the flows crossing a full link (relative tolerance: the residual
    // of a full link is rounding noise).
    for (size_t i = 0; i < n; ++i) {
      if (frozen_[i]) continue;
      bool full = false;
      for (int l : paths[i]) {
        full = full || left_[static_cast<size_t>(l)] <= 1e-9 * capacity_[static_cast<size_t>(l)];
      }
      if (!full) continue;
      frozen_[i] = 1;
      rate_[i] = level;
      --remaining;
      for (int l : paths[i]) --unfrozen_[static_cast<size_t>(l)];
    }
  }
  for (int l : used_) unfrozen_[static_cast<size_t>(l)] = 0;
  return rate_;
}

}  // namespace weft::routing
