// The plane structure of a 3-tier Clos (clos3_coloring.h, Clos3Shape).
#include "weft/routing/clos3_coloring.h"

#include <algorithm>

namespace weft::routing {

std::optional<Clos3Shape> Clos3Shape::of(const topo::Fabric& f) {
  Clos3Shape s;
  const size_t n = f.switches.size();
  s.pod_.assign(n, -1);
  s.slot_.assign(n, -1);
  s.index_.assign(n, -1);
  // Slot of an aggregation switch: its position among its pod's.
  std::vector<int> aggs_in_pod;
  for (size_t sw = 0; sw < n; ++sw) {
    const auto& x = f.switches[sw];
    if (x.tier == topo::kTierCore) continue;
    if (x.tier != topo::kTierLeaf && x.tier != topo::kTierSpine) return std::nullopt;
    if (x.pod < 0) return std::nullopt;
    s.pod_[sw] = x.pod;
    s.pods_ = std::max(s.pods_, x.pod + 1);
    if (aggs_in_pod.size() <= static_cast<size_t>(x.pod)) aggs_in_pod.resize(static_cast<size_t>(x.pod) + 1, 0);
    if (x.tier == topo::kTierSpine) {
      s.slot_[sw] = aggs_in_pod[static_cast<size_t>(x.pod)]++;
      s.slots_ = std::max(s.slots_, s.slot_[sw] + 1);
    }
  }
  // Plane of a core: the one slot of every aggregation switch it links to.
  std::vector<int> in_plane;
  for (size_t sw = 0; sw < n; ++sw) {
    if (f.switches[sw].tier != topo::kTierCore) continue;
    int plane = -1;
    for (const auto& a : f.switch_neighbours(static_cast<int>(sw))) {
      const int sl = s.slot_[static_cast<size_t>(a.sw)];
      if (sl < 0 || (plane >= 0 && sl != plane)) return std::nullopt;
      plane = sl;
    }
    if (plane < 0) continue;  // a core linked to nothing carries nothing
    s.slot_[sw] = plane;
    if (in_plane.size() <= static_cast<size_t>(plane)) in_plane.resize(static_cast<size_t>(plane) + 1, 0);
    s.index_[sw] = in_plane[static_cast<size_t>(plane)]++;
    s.plane_ = std::max(s.plane_, s.index_[sw] + 1);
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
      if (s.pod_[static_cast<size_t>(lo)] != s.pod_[static_cast<size_t>(hi)]) return std::nullopt;
      s.leaf_up_[static_cast<size_t>(lo) * static_cast<size_t>(s.slots_) + static_cast<size_t>(s.slot_[static_cast<size_t>(hi)])] = up;
    } else if (tl == topo::kTierSpine && th == topo::kTierCore) {
      s.agg_up_[static_cast<size_t>(lo) * static_cast<size_t>(s.plane_) + static_cast<size_t>(s.index_[static_cast<size_t>(hi)])] = up;
    } else {
      return std::nullopt;
    }
  }
  return s;
}

std::optional<Clos3Key> Clos3Shape::key(std::span<const int> rt) const {
  auto is = [&](int sw, int tier) {
    if (sw < 0 || static_cast<size_t>(sw) >= pod_.size()) return false;
    const bool leaf = pod_[static_cast<size_t>(sw)] >= 0 && slot_[static_cast<size_t>(sw)] < 0;
    const bool agg = pod_[static_cast<size_t>(sw)] >= 0 && slot_[static_cast<size_t>(sw)] >= 0;
    return tier == topo::kTierLeaf ? leaf : tier == topo::kTierSpine ? agg : !leaf && !agg && slot_[static_cast<size_t>(sw)] >= 0;
  };
  auto leaf_up = [&](int leaf, int agg) {
    return pod_[static_cast<size_t>(leaf)] == pod_[static_cast<size_t>(agg)] &&
           leaf_up_[static_cast<size_t>(leaf) * static_cast<size_t>(slots_) + static_cast<size_t>(slot_[static_cast<size_t>(agg)])];
  };
  auto agg_up = [&](int agg, int core) {
    return slot_[static_cast<size_t>(agg)] == slot_[static_cast<size_t>(core)] &&
           agg_up_[static_cast<size_t>(agg) * static_cast<size_t>(plane_) + static_cast<size_t>(index_[static_cast<size_t>(core)])];
  };
  if (rt.size() == 3) {
    if (!is(rt[0], topo::kTierLeaf) || !is(rt[1], topo::kTierSpine) || !is(rt[2], topo::kTierLeaf)) return std::nullopt;
    if (!leaf_up(rt[0], rt[1]) || !leaf_up(rt[2], rt[1])) return std::nullopt;
    return Clos3Key{slot_[static_cast<size_t>(rt[1])], -1};
  }
  if (rt.size() != 5) return std::nullopt;
  if (!is(rt[0], topo::kTierLeaf) || !is(rt[1], topo::kTierSpine) || !is(rt[2], topo::kTierCore) ||
      !is(rt[3], topo::kTierSpine) || !is(rt[4], topo::kTierLeaf)) {
    return std::nullopt;
  }
  if (!leaf_up(rt[0], rt[1]) || !agg_up(rt[1], rt[2]) || !agg_up(rt[3], rt[2]) || !leaf_up(rt[4], rt[3])) {
    return std::nullopt;
  }
  return Clos3Key{slot_[static_cast<size_t>(rt[1])], index_[static_cast<size_t>(rt[2])]};
}

}  // namespace weft::routing
