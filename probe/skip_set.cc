#include "weft/probe/skip_set.h"

#include <algorithm>

namespace weft::probe {

void SkipSet::add(uint32_t dst, uint16_t first, uint16_t last) {
  if (first > last) return;
  auto& v = by_dst_[dst];
  // The first range that ends at or after first - 1 (touching counts).
  auto lo = std::lower_bound(v.begin(), v.end(), first,
                             [](const PortRange& r, uint16_t p) { return uint32_t{r.last} + 1 < p; });
  // One past the last range that starts at or before last + 1.
  auto hi = std::upper_bound(lo, v.end(), last,
                             [](uint16_t p, const PortRange& r) { return uint32_t{p} + 1 < r.first; });
  if (lo == hi) {
    v.insert(lo, PortRange{first, last});
    return;
  }
  lo->first = std::min(lo->first, first);
  lo->last = std::max((hi - 1)->last, last);
  v.erase(lo + 1, hi);
}

bool SkipSet::contains(uint32_t dst, uint16_t port) const {
  auto it = by_dst_.find(dst);
  if (it == by_dst_.end()) return false;
  const auto& v = it->second;
  auto r = std::upper_bound(v.begin(), v.end(), port, [](uint16_t p, const PortRange& x) { return p < x.first; });
  return r != v.begin() && (r - 1)->last >= port;
}

uint64_t SkipSet::ports_within(uint32_t dst, uint16_t first, uint16_t last) const {
  auto it = by_dst_.find(dst);
  if (it == by_dst_.end()) return 0;
  uint64_t n = 0;
  for (const auto& r : it->second) {
    const uint32_t lo = std::max(r.first, first), hi = std::min(r.last, last);
    if (lo <= hi) n += hi - lo + 1;
  }
  return n;
}

size_t SkipSet::ranges() const {
  size_t n = 0;
  for (const auto& [dst, v] : by_dst_) n += v.size();
  return n;
}

uint64_t SkipSet::ports() const {
  uint64_t n = 0;
  for (const auto& [dst, v] : by_dst_)
    for (const auto& r : v) n += uint64_t{r.last} - r.first + 1;
  return n;
}

void SkipSet::for_each(const std::function<void(uint32_t, const std::vector<PortRange>&)>& f) const {
  for (const auto& [dst, v] : by_dst_) f(dst, v);
}

}  // namespace weft::probe
