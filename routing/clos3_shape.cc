// The plane structure of a 3-tier Clos (clos3_coloring.h, Clos3Shape).
#include "weft/routing/clos3_coloring.h"

#include <algorithm>

namespace weft::routing {

std::optional<Clos3Shape> Clos3Shape::of(const topo::Fabric& f) {
  Clos3Shape s;
  const size_t n = f.switches.size();
  s.sw_.assign(n, Switch{});
  // Slot of an aggregation switch: its position among its pod's.
  std::vector<int> aggs_in_pod;
  for (size_t sw = 0; sw < n; ++sw) {
    const auto& x = f.switches[sw];
    if (x.tier == topo::kTierCore) continue;
    if (x.tier != topo::kTierLeaf && x.tier != topo::kTierSpine) return std::nullopt;
    if (x.pod < 0) return std::nullopt;
    Switch& me = s.sw_[sw];
    me.pod = x.pod;
    me.role = Role::kLeaf;
    s.pods_ = std::max(s.pods_, x.pod + 1);
    if (aggs_in_pod.size() <= static_cast<size_t>(x.pod)) aggs_in_pod.resize(static_cast<size_t>(x.pod) + 1, 0);
    if (x.tier == topo::kTierSpine) {
      me.role = Role::kAgg;
      me.slot = aggs_in_pod[static_cast<size_t>(x.pod)]++;
      s.slots_ = std::max(s.slots_, me.slot + 1);
    }
  }
  // Plane of a core: the one slot of every aggregation switch it links to.
  std::vector<int> in_plane;
  for (size_t sw = 0; sw < n; ++sw) {
    if (f.switches[sw].tier != topo::kTierCore) continue;
    int plane = -1;
    for (const auto& a : f.switch_neighbours(static_cast<int>(sw))) {
      const Switch& agg = s.sw_[static_cast<size_t>(a.sw)];
      if (agg.role != Role::kAgg || (plane >= 0 && agg.slot != plane)) return std::nullopt;
      plane = agg.slot;
    }
    if (plane < 0) continue;  // a core linked to nothing carries nothing
    Switch& me = s.sw_[sw];
    me.role = Role::kCore;
    me.slot = plane;
    if (in_plane.size() <= static_cast<size_t>(plane)) in_plane.resize(static_cast<size_t>(plane) + 1, 0);
    me.index = in_plane[static_cast<size_t>(plane)]++;
    s.plane_ = std::max(s.plane_, me.index + 1);
  }
  if (s.slots_ == 0 || s.slots_ > 64) return std::nullopt;  // slots as bits of a word (Clos3Colorer)
  s.leaf_up_.assign(n * static_cast<size_t>(s.slots_), 0);
  s.agg_up_.assign(n * static_cast<size_t>(std::max(s.plane_, 1)), 0);
  for (const auto& l : f.links) {
    if (!f.is_switch_vertex(l.a) || !f.is_switch_vertex(l.b)) continue;
    int lo = f.vertex_switch(l.a), hi = f.vertex_switch(l.b);
    if (f.switches[static_cast<size_t>(lo)].tier > f.switches[static_cast<size_t>(hi)].tier) std::swap(lo, hi);
    const int tl = f.switches[static_cast<size_t>(lo)].tier, th = f.switches[static_cast<size_t>(hi)].tier;
    const bool up = l.state == topo::LinkState::kUp;
    if (tl == topo::kTierLeaf && th == topo::kTierSpine) {
      if (s.at(lo).pod != s.at(hi).pod) return std::nullopt;
      s.leaf_up_[static_cast<size_t>(lo) * static_cast<size_t>(s.slots_) + static_cast<size_t>(s.at(hi).slot)] = up;
    } else if (tl == topo::kTierSpine && th == topo::kTierCore) {
      s.agg_up_[static_cast<size_t>(lo) * static_cast<size_t>(s.plane_) + static_cast<size_t>(s.at(hi).index)] = up;
    } else {
      return std::nullopt;
    }
  }
  return s;
}

std::optional<Clos3Key> Clos3Shape::key(std::span<const int> rt) const {
  if (rt.size() != 3 && rt.size() != 5) return std::nullopt;
  const size_t n = sw_.size();
  auto valid = [&](int sw) { return static_cast<size_t>(sw) < n; };  // negative ones wrap above n
  // Leaf `l` and aggregation switch `a` of one pod, linked by a link that is up.
  auto leaf_up = [&](int l, const Switch& a) {
    const Switch& leaf = sw_[static_cast<size_t>(l)];
    return leaf.role == Role::kLeaf && leaf.pod == a.pod &&
           leaf_up_[static_cast<size_t>(l) * static_cast<size_t>(slots_) + static_cast<size_t>(a.slot)];
  };
  // Aggregation switch `a` (index ai) and core `c` of its plane, linked by a link that is up.
  auto agg_up = [&](int ai, const Switch& a, const Switch& c) {
    return a.slot == c.slot &&
           agg_up_[static_cast<size_t>(ai) * static_cast<size_t>(plane_) + static_cast<size_t>(c.index)];
  };
  if (!valid(rt[0]) || !valid(rt[1]) || !valid(rt[2])) return std::nullopt;
  const Switch& up = sw_[static_cast<size_t>(rt[1])];
  if (up.role != Role::kAgg || !leaf_up(rt[0], up)) return std::nullopt;
  if (rt.size() == 3) {
    if (!leaf_up(rt[2], up)) return std::nullopt;
    return Clos3Key{up.slot, -1};
  }
  if (!valid(rt[3]) || !valid(rt[4])) return std::nullopt;
  const Switch& core = sw_[static_cast<size_t>(rt[2])];
  const Switch& down = sw_[static_cast<size_t>(rt[3])];
  if (core.role != Role::kCore || down.role != Role::kAgg || !agg_up(rt[1], up, core) || !agg_up(rt[3], down, core) ||
      !leaf_up(rt[4], down)) {
    return std::nullopt;
  }
  return Clos3Key{up.slot, core.index};
}

}  // namespace weft::routing
