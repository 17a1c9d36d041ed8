#include "weft/routing/clos3_coloring.h"

#include <algorithm>

#include <fmt/format.h>

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
  if (s.slots_ == 0) return std::nullopt;
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

Result<Clos3Coloring> Clos3Colorer::color(std::span<const Clos3Flow> flows, std::span<const Clos3Key> keys,
                                          const Clos3Options& opt) {
  const int S = shape_.slots(), C = shape_.plane_size(), P = shape_.pods();
  for (size_t i = 0; i < flows.size(); ++i) {
    const Clos3Flow& fl = flows[i];
    if (fl.n == 0) return invalid_argument(fmt::format("flow {} has no usable route", i));
    if (static_cast<size_t>(fl.at) + fl.n > keys.size()) return invalid_argument(fmt::format("flow {}: keys out of range", i));
    const bool cross = shape_.pod(fl.src_leaf) != shape_.pod(fl.dst_leaf);
    for (uint32_t k = fl.at; k < fl.at + fl.n; ++k) {
      const Clos3Key& key = keys[k];
      if (key.slot < 0 || key.slot >= S || (cross ? key.core < 0 || key.core >= C : key.core != -1)) {
        return invalid_argument(fmt::format("flow {}: route ({}, {}) is not one of this fabric", i, key.slot, key.core));
      }
    }
  }
  Clos3Coloring out;
  struck_.assign(keys.size(), 0);
  slot_.assign(flows.size(), -1);
  core_.assign(flows.size(), -1);
  tier1_.resize(flows.size());  // reused: the colour lists keep their capacity
  const int ns = shape_.num_switches();
  std::vector<int> up, down;  // tier-2 loads: [(pod * S + s) * C + c]
  for (int attempt = 0;; ++attempt) {
    // Tier 1: slots, from the keys not struck (all of them again if a flow
    // had every slot struck).
    for (size_t i = 0; i < flows.size(); ++i) {
      const Clos3Flow& fl = flows[i];
      auto& e = tier1_[i];
      e.left = fl.src_leaf, e.right = fl.dst_leaf;
      e.colours.clear();
      for (int pass = 0; pass < 2 && e.colours.empty(); ++pass) {
        for (uint32_t k = fl.at; k < fl.at + fl.n; ++k) {
          if (pass == 0 && struck_[k]) continue;
          if (std::find(e.colours.begin(), e.colours.end(), keys[k].slot) == e.colours.end()) e.colours.push_back(keys[k].slot);
        }
      }
    }
    WEFT_ASSIGN_OR_RETURN(auto t1, color_list_edges(ns, ns, S, tier1_, {.min_load = opt.min_load, .budget = opt.budget}));
    out.target = std::max(opt.min_load, t1.lower_bound);
    out.max_load = t1.max_load;
    for (size_t i = 0; i < flows.size(); ++i) slot_[i] = t1.colour[i];
    // Tier 2, slot by slot: cores of the plane, aiming at the tier-1 target.
    up.assign(static_cast<size_t>(P) * static_cast<size_t>(S) * static_cast<size_t>(C), 0);
    down.assign(up.size(), 0);
    auto at = [&](int pod, int s, int c) {
      return (static_cast<size_t>(pod) * static_cast<size_t>(S) + static_cast<size_t>(s)) * static_cast<size_t>(C) +
             static_cast<size_t>(c);
    };
    for (int s = 0; s < S; ++s) {
      size_t m = 0;
      tier2_flow_.clear();
      for (size_t i = 0; i < flows.size(); ++i) {
        const Clos3Flow& fl = flows[i];
        if (slot_[i] != s || shape_.pod(fl.src_leaf) == shape_.pod(fl.dst_leaf)) continue;
        if (tier2_.size() <= m) tier2_.resize(m + 1);
        auto& e = tier2_[m++];
        e.left = shape_.pod(fl.src_leaf), e.right = shape_.pod(fl.dst_leaf);
        e.colours.clear();
        for (int pass = 0; pass < 2 && e.colours.empty(); ++pass) {
          for (uint32_t k = fl.at; k < fl.at + fl.n; ++k) {
            if (keys[k].slot == s && (pass == 1 || !struck_[k])) e.colours.push_back(keys[k].core);
          }
        }
        tier2_flow_.push_back(static_cast<int>(i));
      }
      if (m == 0) continue;
      tier2_.resize(m);
      WEFT_ASSIGN_OR_RETURN(auto t2, color_list_edges(P, P, C, tier2_, {.min_load = out.target, .budget = opt.budget}));
      for (size_t j = 0; j < m; ++j) {
        const int i = tier2_flow_[j];
        core_[static_cast<size_t>(i)] = t2.colour[j];
        ++up[at(tier2_[j].left, s, t2.colour[j])];
        ++down[at(tier2_[j].right, s, t2.colour[j])];
      }
    }
    // Flows on an overloaded core link strike their slot and try again.
    bool over = false;
    for (size_t i = 0; i < flows.size(); ++i) {
      const Clos3Flow& fl = flows[i];
      if (core_[i] < 0 || shape_.pod(fl.src_leaf) == shape_.pod(fl.dst_leaf)) continue;
      const int u = up[at(shape_.pod(fl.src_leaf), slot_[i], core_[i])];
      const int d = down[at(shape_.pod(fl.dst_leaf), slot_[i], core_[i])];
      out.max_load = std::max({out.max_load, u, d});
      if (u <= out.target && d <= out.target) continue;
      over = true;
      if (attempt >= opt.repairs) continue;
      for (uint32_t k = fl.at; k < fl.at + fl.n; ++k) struck_[k] = struck_[k] || keys[k].slot == slot_[i];
    }
    if (!over || attempt >= opt.repairs) break;
    ++out.repairs;
    for (size_t i = 0; i < flows.size(); ++i) core_[i] = -1;
  }
  out.chosen.resize(flows.size());
  for (size_t i = 0; i < flows.size(); ++i) {
    const Clos3Flow& fl = flows[i];
    for (uint32_t k = fl.at; k < fl.at + fl.n; ++k) {
      if (keys[k].slot == slot_[i] && keys[k].core == core_[i]) {
        out.chosen[i] = static_cast<int>(k - fl.at);
        break;
      }
    }
  }
  return out;
}

}  // namespace weft::routing
