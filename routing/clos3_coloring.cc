// A 3-tier step coloured tier by tier (clos3_coloring.h); tier 2 with pods
// paired one to one is in clos3_tier2.cc.
#include "weft/routing/clos3_coloring.h"

#include <algorithm>
#include <array>
#include <bit>

#include <fmt/format.h>

#include "weft/routing/clos3_bound.h"

namespace weft::routing {

size_t Clos3Colorer::cell(int pod, int s, int c) const {
  return (static_cast<size_t>(pod) * static_cast<size_t>(shape_.slots()) + static_cast<size_t>(s)) *
             static_cast<size_t>(shape_.plane_size()) +
         static_cast<size_t>(c);
}

// After tier 2 left flows above the target: a leaf whose flows reach, in a
// slot, only cores already above it (the hash ties the aggregation switch's
// choice to the leaf's) would put whichever flows tier 1 gives it there on
// those cores again. Every such flow of the leaf strikes the slot, not just
// the ones that were there: tier 1 then moves the leaf's share of the slot
// to its other slots.
void Clos3Colorer::strike_pinned() {
  const size_t S = static_cast<size_t>(shape_.slots());
  hot_.assign(static_cast<size_t>(shape_.num_switches()) * S, 0);
  for (int f : over_) {
    const Clos3Flow& fl = flows_[static_cast<size_t>(f)];
    const size_t s = static_cast<size_t>(slot_[static_cast<size_t>(f)]);
    hot_[static_cast<size_t>(fl.src_leaf) * S + s] |= 1;
    hot_[static_cast<size_t>(fl.dst_leaf) * S + s] |= 2;
  }
  // A leaf can do without a slot only when its other slots hold its flows
  // at the target: otherwise its flows there stay, and only those above the
  // target strike it (as before).
  deg_out_.assign(static_cast<size_t>(shape_.num_switches()), 0);
  deg_in_.assign(deg_out_.size(), 0);
  for (const Clos3Flow& fl : flows_) ++deg_out_[static_cast<size_t>(fl.src_leaf)], ++deg_in_[static_cast<size_t>(fl.dst_leaf)];
  const long room = static_cast<long>(S - 1) * target_;
  for (size_t x = 0; x < deg_out_.size(); ++x) {
    for (size_t s = 0; s < S; ++s) {
      if (deg_out_[x] > room) hot_[x * S + s] &= ~1;
      if (deg_in_[x] > room) hot_[x * S + s] &= ~2;
    }
  }
  for (size_t i = 0; i < flows_.size(); ++i) {
    const Clos3Flow& fl = flows_[i];
    const int up = shape_.pod(fl.src_leaf), down = shape_.pod(fl.dst_leaf);
    if (up == down) continue;
    uint64_t open = 0, listed = 0;  // slots with a key onto a core link at or below the target; slots listed
    for (uint32_t k = fl.at; k < fl.at + fl.n; ++k) {
      const int s = keys_[k].slot;
      listed |= uint64_t{1} << s;
      if (up_[cell(up, s, keys_[k].core)] < target_ && down_[cell(down, s, keys_[k].core)] < target_) {
        open |= uint64_t{1} << s;
      }
    }
    for (uint64_t rest = listed & ~open; rest != 0; rest &= rest - 1) {
      const auto s = static_cast<size_t>(std::countr_zero(rest));
      if ((hot_[static_cast<size_t>(fl.src_leaf) * S + s] & 1) || (hot_[static_cast<size_t>(fl.dst_leaf) * S + s] & 2)) {
        struck_[i] |= uint64_t{1} << s;
      }
    }
  }
}

// Where the repairs did not reach the target: each flow on a link above it
// moves, over all its routes (slot and core), to the one whose busiest link
// is least busy with it (min-congestion, one flow at a time, as
// route_assignment.h): the overload is spread instead of left on the core
// link the pinned flows share.
void Clos3Colorer::settle(int min_load) {
  const size_t S = static_cast<size_t>(shape_.slots());
  leaf_up_.assign(static_cast<size_t>(shape_.num_switches()) * S, 0);
  leaf_down_.assign(leaf_up_.size(), 0);
  up_.assign(static_cast<size_t>(shape_.pods()) * S * static_cast<size_t>(shape_.plane_size()), 0);
  down_.assign(up_.size(), 0);
  auto links = [&](size_t i, int s, int c) {
    const Clos3Flow& fl = flows_[i];
    std::array<int*, 4> at{&leaf_up_[static_cast<size_t>(fl.src_leaf) * S + static_cast<size_t>(s)],
                           &leaf_down_[static_cast<size_t>(fl.dst_leaf) * S + static_cast<size_t>(s)], nullptr, nullptr};
    if (c >= 0) at[2] = &up_[cell(shape_.pod(fl.src_leaf), s, c)], at[3] = &down_[cell(shape_.pod(fl.dst_leaf), s, c)];
    return at;
  };
  auto add = [&](size_t i, int s, int c, int d) {
    for (int* l : links(i, s, c)) {
      if (l) *l += d;
    }
  };
  for (size_t i = 0; i < flows_.size(); ++i) add(i, slot_[i], core_[i], +1);
  const int target = std::max(min_load, target_);
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < flows_.size(); ++i) {
      int worst = 0;
      for (int* l : links(i, slot_[i], core_[i])) worst = std::max(worst, l ? *l : 0);
      if (worst <= target) continue;
      add(i, slot_[i], core_[i], -1);
      const Clos3Flow& fl = flows_[i];
      int best_worst = 0, best_sum = 0;
      for (uint32_t k = fl.at; k < fl.at + fl.n; ++k) {
        int w = 0, sum = 0;
        for (int* l : links(i, keys_[k].slot, keys_[k].core)) {
          if (l) w = std::max(w, *l + 1), sum += *l;
        }
        if (k == fl.at || std::pair(w, sum) < std::pair(best_worst, best_sum)) {
          best_worst = w, best_sum = sum, slot_[i] = keys_[k].slot, core_[i] = keys_[k].core;
        }
      }
      add(i, slot_[i], core_[i], +1);
    }
  }
}

// Tier 2 slot by slot by list edge colouring (pods not paired).
Status Clos3Colorer::tier2_lists(int budget) {
  for (int s = 0; s < shape_.slots(); ++s) {
    size_t m = 0;
    tier2_flow_.clear();
    for (size_t i = 0; i < flows_.size(); ++i) {
      const Clos3Flow& fl = flows_[i];
      if (slot_[i] != s || shape_.pod(fl.src_leaf) == shape_.pod(fl.dst_leaf)) continue;
      if (tier2_.size() <= m) tier2_.resize(m + 1);
      auto& e = tier2_[m++];
      e.left = shape_.pod(fl.src_leaf), e.right = shape_.pod(fl.dst_leaf);
      e.colours.clear();
      for (uint32_t k = fl.at; k < fl.at + fl.n; ++k) {
        if (keys_[k].slot == s) e.colours.push_back(keys_[k].core);
      }
      tier2_flow_.push_back(static_cast<int>(i));
    }
    if (m == 0) continue;
    tier2_.resize(m);
    WEFT_ASSIGN_OR_RETURN(auto t2, color_list_edges(shape_.pods(), shape_.pods(), shape_.plane_size(), tier2_,
                                                    {.min_load = target_, .budget = budget}));
    for (size_t j = 0; j < m; ++j) core_[static_cast<size_t>(tier2_flow_[j])] = t2.colour[j];
  }
  return ok_status();
}

Result<Clos3Coloring> Clos3Colorer::color(std::span<const Clos3Flow> flows, std::span<const Clos3Key> keys,
                                          const Clos3Options& opt) {
  const int S = shape_.slots(), C = shape_.plane_size();
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
  flows_ = flows, keys_ = keys;
  index_cores();
  Clos3Coloring out;
  // Tier 1 (slots), then tier 2 (cores). Flows that tier 2 left above the
  // target strike their slot, and both tiers are coloured again; the
  // attempt with the fewest such flows is kept.
  const int ns = shape_.num_switches();
  struck_.assign(flows.size(), 0);
  tier1_.resize(flows.size());  // reused: the colour lists keep their capacity
  size_t best_over = 0;  // of the attempt kept
  constexpr int kPatience = 6;  // attempts in a row without fewer flows above the target
  int since_better = 0;
  int t1_min = opt.min_load;  // tier 1 aims at out.target once that is known to be above tier 1's bound
  for (int attempt = 0;; ++attempt) {
    for (size_t i = 0; i < flows.size(); ++i) {
      // After the first attempt only a flow that struck a slot has a new list.
      if (attempt > 0 && struck_[i] == 0) continue;
      auto& e = tier1_[i];
      e.left = flows[i].src_leaf, e.right = flows[i].dst_leaf;
      e.colours.clear();
      // Slots as bits (Clos3Shape: at most 64), listed in the keys' order.
      uint64_t has = 0;
      for (uint32_t k = flows[i].at; k < flows[i].at + flows[i].n; ++k) has |= uint64_t{1} << keys[k].slot;
      const uint64_t allowed = (has & ~struck_[i]) != 0 ? has & ~struck_[i] : has;  // all struck: all again
      // More cores first: tier 1 breaks ties of load by list order, and a
      // slot where the flow reaches many cores leaves tier 2 room.
      std::array<int, 64> n_cores{};
      uint64_t listed = 0;
      for (uint32_t k = flows[i].at; k < flows[i].at + flows[i].n; ++k) {
        const uint64_t bit = uint64_t{1} << keys[k].slot;
        ++n_cores[static_cast<size_t>(keys[k].slot)];
        if ((allowed & bit) == 0 || (listed & bit) != 0) continue;
        listed |= bit;
        e.colours.push_back(keys[k].slot);
      }
      // Insertion sort, stable: a list holds at most 64 slots, and
      // std::stable_sort allocates a buffer per call (65,536 calls per attempt).
      for (size_t a = 1; a < e.colours.size(); ++a) {
        const int x = e.colours[a];
        size_t b = a;
        for (; b > 0 && n_cores[static_cast<size_t>(e.colours[b - 1])] < n_cores[static_cast<size_t>(x)]; --b) {
          e.colours[b] = e.colours[b - 1];
        }
        e.colours[b] = x;
      }
    }
    WEFT_ASSIGN_OR_RETURN(auto t1, color_list_edges(ns, ns, S, tier1_, {.min_load = t1_min, .budget = opt.budget}));
    target_ = std::max(opt.min_load, t1.lower_bound);
    if (attempt == 0 && t1_min == opt.min_load) {
      // Where the cores a leaf's flows reach cannot carry its share at tier
      // 1's bound (clos3_bound.h), no attempt can: aim at what can be
      // reached, and let tier 1 use that slack too (a leaf whose flows reach
      // one core of a plane must send fewer of them through it).
      auto reach = clos3_reach_bound(shape_, flows, keys, target_);
      out.tier1_bound = target_;
      out.target = reach.load;
      out.witness = std::move(reach.witness);
      if (out.target > target_) {
        t1_min = out.target;
        --attempt;
        continue;
      }
    }
    target_ = out.target;  // struck lists may raise tier 1's own bound: keep aiming at the first
    slot_ = std::move(t1.colour);
    core_.assign(flows.size(), -1);
    if (!tier2_paired()) WEFT_RETURN_IF_ERROR(tier2_lists(opt.budget));
    // Flows on core links above the target (either direction).
    up_.assign(static_cast<size_t>(shape_.pods()) * static_cast<size_t>(S) * static_cast<size_t>(C), 0);
    down_.assign(up_.size(), 0);
    for (size_t i = 0; i < flows.size(); ++i) {
      if (core_[i] < 0) continue;
      ++up_[cell(shape_.pod(flows[i].src_leaf), slot_[i], core_[i])];
      ++down_[cell(shape_.pod(flows[i].dst_leaf), slot_[i], core_[i])];
    }
    over_.clear();
    for (size_t i = 0; i < flows.size(); ++i) {
      if (core_[i] >= 0 && (up_[cell(shape_.pod(flows[i].src_leaf), slot_[i], core_[i])] > target_ ||
                            down_[cell(shape_.pod(flows[i].dst_leaf), slot_[i], core_[i])] > target_)) {
        over_.push_back(static_cast<int>(i));
      }
    }
    if (attempt == 0 || over_.size() < best_over) {
      best_over = over_.size();
      best_slot_ = slot_, best_core_ = core_;
      since_better = 0;
    } else {
      ++since_better;
    }
    // Attempts that stopped helping do not start to again often enough to
    // pay for a full colouring of both tiers each.
    if (over_.empty() || attempt >= opt.repairs || since_better >= kPatience) {
      slot_.swap(best_slot_), core_.swap(best_core_);
      break;
    }
    // Every flow on an overloaded core link moves: the link's pinned flows
    // came from several leaves, and which of them should leave the slot is
    // tier 1's choice.
    for (int f : over_) {
      struck_[static_cast<size_t>(f)] |= uint64_t{1} << slot_[static_cast<size_t>(f)];
    }
    // Only with slack in tier 1 (the target above its bound): at the bound a
    // leaf must fill every slot, and a leaf without a slot leaves it stuck.
    if (out.target > out.tier1_bound) strike_pinned();
    ++out.repairs;
  }
  if (best_over > 0) settle(opt.min_load);
  // Loads, counted from the result (tier 1 may move under tier 2's swaps).
  std::vector<int> leaf_up(static_cast<size_t>(ns) * static_cast<size_t>(S), 0), leaf_down(leaf_up.size(), 0);
  std::vector<int> up(static_cast<size_t>(shape_.pods()) * static_cast<size_t>(S) * static_cast<size_t>(C), 0),
      down(up.size(), 0);
  out.chosen.assign(flows.size(), -1);
  for (size_t i = 0; i < flows.size(); ++i) {
    const Clos3Flow& fl = flows[i];
    const int s = slot_[i];
    out.max_load = std::max({out.max_load, ++leaf_up[static_cast<size_t>(fl.src_leaf) * static_cast<size_t>(S) + static_cast<size_t>(s)],
                             ++leaf_down[static_cast<size_t>(fl.dst_leaf) * static_cast<size_t>(S) + static_cast<size_t>(s)]});
    if (core_[i] >= 0) {
      out.max_load = std::max({out.max_load, ++up[cell(shape_.pod(fl.src_leaf), s, core_[i])],
                               ++down[cell(shape_.pod(fl.dst_leaf), s, core_[i])]});
    }
    for (uint32_t k = fl.at; k < fl.at + fl.n; ++k) {
      if (keys[k].slot == s && keys[k].core == core_[i]) out.chosen[i] = static_cast<int>(k - fl.at);
    }
    if (out.chosen[i] < 0) return internal_error(fmt::format("flow {}: no route for slot {} core {}", i, s, core_[i]));
  }
  return out;
}

}  // namespace weft::routing
