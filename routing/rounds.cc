#include "weft/routing/rounds.h"

#include <algorithm>

#include "weft/routing/bipartite_rounds.h"

namespace weft::routing {

int RoundAssigner::assign(std::span<const RoundFlow> flows, std::vector<int>& round) {
  round.assign(flows.size(), 0);
  order_.resize(flows.size());
  for (size_t i = 0; i < flows.size(); ++i) order_[i] = i;
  std::sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
    const RoundFlow& x = flows[a];
    const RoundFlow& y = flows[b];
    if (x.fabric_links.size() != y.fabric_links.size()) return x.fabric_links.size() > y.fabric_links.size();
    return x.src != y.src ? x.src < y.src : x.dst < y.dst;
  });
  // Bipartite conflicts: König, max load rounds (bipartite_rounds.h).
  if (const int r = bipartite_rounds(flows, order_, static_cast<int>(used_.size()), round); r > 0) return r;
  int rounds = 1;
  touched_.clear();
  for (size_t i : order_) {
    const RoundFlow& fl = flows[i];
    // The lowest round none of its links is taken in: a link holds a few
    // rounds at most, so a scan of its list beats a bitmap per link.
    int r = 0;
    for (bool clash = true; clash;) {
      clash = false;
      for (int dl : fl.fabric_links) {
        const auto& u = used_[static_cast<size_t>(dl)];
        if (std::find(u.begin(), u.end(), r) != u.end()) {
          clash = true;
          ++r;
          break;
        }
      }
    }
    for (int dl : fl.fabric_links) {
      auto& u = used_[static_cast<size_t>(dl)];
      if (u.empty()) touched_.push_back(dl);
      u.push_back(r);
    }
    round[i] = r;
    rounds = std::max(rounds, r + 1);
  }
  for (int dl : touched_) used_[static_cast<size_t>(dl)].clear();
  return rounds;
}

}  // namespace weft::routing
