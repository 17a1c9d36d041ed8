#include "weft/routing/fluid_step.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace weft::routing {
namespace {
// Relative slack for "saturated" and "gets the most": rates come out of
// floating-point progressive filling.
constexpr double kSlack = 1e-9;
}  // namespace

FluidStep::FluidStep(std::vector<double> capacity)
    : capacity_(std::move(capacity)), mm_(capacity_), sum_(capacity_.size(), 0), max_rate_(capacity_.size(), 0),
      dirty_(capacity_.size(), 0), start_(capacity_.size() + 1, 0), fill_(capacity_.size() + 1, 0) {}

void FluidStep::solve(std::span<const std::vector<int>> links, double now) {
  for (size_t i = 0; i < links.size(); ++i) {
    if (active_[i]) left_[i] -= rate_[i] * (now - epoch_);
  }
  epoch_ = now;
  rate_ = mm_.solve(links, active_);
  for (int l : used_) {
    sum_[static_cast<size_t>(l)] = 0;
    max_rate_[static_cast<size_t>(l)] = 0;
    dirty_[static_cast<size_t>(l)] = 0;
  }
  order_.clear();
  for (size_t i = 0; i < links.size(); ++i) {
    if (!active_[i]) continue;
    for (int l : links[i]) {
      sum_[static_cast<size_t>(l)] += rate_[i];
      max_rate_[static_cast<size_t>(l)] = std::max(max_rate_[static_cast<size_t>(l)], rate_[i]);
    }
    finish_[i] = rate_[i] > 0 ? now + left_[i] / rate_[i] : std::numeric_limits<double>::infinity();
    order_.push_back(i);
  }
  std::sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
    return finish_[a] != finish_[b] ? finish_[a] < finish_[b] : a < b;
  });
}

// A saturated link that no finished flow crossed since the last solve and on
// which this flow gets the most.
bool FluidStep::keeps_bottleneck(const std::vector<int>& path, double rate) const {
  for (int l : path) {
    const size_t u = static_cast<size_t>(l);
    if (!dirty_[u] && sum_[u] >= capacity_[u] * (1 - kSlack) && rate >= max_rate_[u] * (1 - kSlack)) return true;
  }
  return false;
}

Result<FluidResult> FluidStep::run(std::span<const std::vector<int>> links, std::span<const double> bytes) {
  const size_t n = links.size();
  if (bytes.size() != n) return invalid_argument("fluid step: one size per flow");
  left_.assign(bytes.begin(), bytes.end());
  rate_.assign(n, 0);
  finish_.assign(n, 0);
  active_.assign(n, 0);
  epoch_ = 0;
  // Flows per link (CSR), for the flows that can lose a bottleneck when a
  // link is freed.
  for (int l : used_) start_[static_cast<size_t>(l)] = fill_[static_cast<size_t>(l)] = 0;
  used_.clear();
  size_t running = 0;
  for (size_t i = 0; i < n; ++i) {
    if (bytes[i] <= 0) continue;
    for (int l : links[i]) {
      if (l < 0 || static_cast<size_t>(l) >= capacity_.size()) return invalid_argument("fluid step: bad link id");
      if (capacity_[static_cast<size_t>(l)] <= 0) {
        return failed_precondition(fmt::format("fluid step: flow {} crosses link {}, which has no capacity", i, l));
      }
      if (fill_[static_cast<size_t>(l)]++ == 0) used_.push_back(l);
    }
    active_[i] = 1;
    ++running;
  }
  size_t total = 0;
  for (int l : used_) {
    const size_t u = static_cast<size_t>(l);
    start_[u] = total;
    total += fill_[u];
    fill_[u] = start_[u];
  }
  on_link_.resize(total);
  for (size_t i = 0; i < n; ++i) {
    if (!active_[i]) continue;
    for (int l : links[i]) on_link_[fill_[static_cast<size_t>(l)]++] = i;
  }

  FluidResult out;
  if (running == 0) return out;
  solve(links, 0);
  ++out.solves;
  size_t pos = 0;
  double t = 0;
  while (running > 0) {
    const double tf = finish_[order_[pos]];
    if (!(tf < std::numeric_limits<double>::infinity())) return internal_error("fluid step: a flow got rate 0");
    t = tf;
    ++out.events;
    // The flows done by now (within a relative 1e-9 of their size: rounding).
    const size_t first = pos;
    while (pos < order_.size()) {
      const size_t i = order_[pos];
      if (left_[i] - rate_[i] * (t - epoch_) > kSlack * bytes[i]) break;
      active_[i] = 0;
      --running;
      ++pos;
    }
    // Did a survivor lose its bottleneck? Only flows on links the finished
    // ones crossed can have.
    bool stale = false;
    for (size_t k = first; k < pos && !stale; ++k) {
      for (int l : links[order_[k]]) {
        const size_t u = static_cast<size_t>(l);
        if (dirty_[u]) continue;
        dirty_[u] = 1;
        for (size_t j = start_[u]; j < fill_[u] && !stale; ++j) {
          const size_t g = on_link_[j];
          stale = active_[g] && !keeps_bottleneck(links[g], rate_[g]);
        }
        if (stale) break;
      }
    }
    if (stale && running > 0) {
      solve(links, t);
      ++out.solves;
      pos = 0;
    }
  }
  out.seconds = t;
  return out;
}

}  // namespace weft::routing
