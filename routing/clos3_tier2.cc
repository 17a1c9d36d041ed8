// Tier 2 of a 3-tier step when pods are paired one to one (clos3_coloring.h).
#include <algorithm>

#include "weft/routing/clos3_coloring.h"

namespace weft::routing {

// ---- Tier 2 with pods paired one to one ----------------------------------
//
// Every cross-pod flow of pod P goes to one pod P', and P' receives from P
// alone (HD on contiguous leaf sets): the flows of (P, slot s) load the links
// P.s -> core c and c -> P'.s alike, so each (P, s) is a b-matching of flows
// to cores, capacity `target` per core. Kuhn's augmenting paths (H. W. Kuhn,
// Naval Res. Logist. Q. 2, 1955; Schrijver, Combinatorial Optimization, Ch. 21
// for b-matchings) place a flow whenever any assignment of the flows held so
// far exists. Where none does — ports hashed by related functions pin many
// flows of a pod to one core of a plane (measured: 9-11 of 128 where 8 fit)
// — a flow swaps slots with a flow of the same leaf pair: tier 1's loads are
// unchanged (both flows leave and enter the same leaves), and each is placed
// in its new slot by an augmenting path, or the swap is undone.

void Clos3Colorer::move(int f, int to, bool log) {
  const int from = cell_of_[static_cast<size_t>(f)];
  if (from >= 0) {
    auto& h = held_[static_cast<size_t>(from)];
    h.erase(std::find(h.begin(), h.end(), f));
  }
  if (to >= 0) held_[static_cast<size_t>(to)].push_back(f);
  cell_of_[static_cast<size_t>(f)] = to;
  if (log) undo_.emplace_back(f, from);
}

void Clos3Colorer::rollback(size_t mark) {
  while (undo_.size() > mark) {
    const auto [f, from] = undo_.back();
    undo_.pop_back();
    move(f, from, false);
  }
}

// Places flow f (slot slot_[f]) on a core of its list: one with room, else
// one whose flows can move along an alternating path (each cell once per
// search).
bool Clos3Colorer::augment(int f) {
  const Clos3Flow& fl = flows_[static_cast<size_t>(f)];
  const int s = slot_[static_cast<size_t>(f)], pod = shape_.pod(fl.src_leaf);
  int best = -1;
  for (const int core : cores_of(f, s)) {
    const size_t c = cell(pod, s, core);
    if (static_cast<int>(held_[c].size()) >= target_) continue;
    if (best < 0 || held_[c].size() < held_[static_cast<size_t>(best)].size()) best = static_cast<int>(c);
  }
  if (best >= 0) {
    move(f, best, true);
    return true;
  }
  for (const int core : cores_of(f, s)) {
    const size_t c = cell(pod, s, core);
    if (seen_[c] == search_) continue;
    seen_[c] = search_;
    for (size_t j = 0; j < held_[c].size(); ++j) {
      if (augment(held_[c][j])) {  // that flow left c: take its place
        move(f, static_cast<int>(c), true);
        return true;
      }
    }
  }
  return false;
}

bool Clos3Colorer::has_slot(int f, int s) const { return !cores_of(f, s).empty(); }

std::span<const int> Clos3Colorer::cores_of(int f, int s) const {
  const size_t b = static_cast<size_t>(f) * (static_cast<size_t>(shape_.slots()) + 1) + static_cast<size_t>(s);
  return {by_slot_.data() + slot_at_[b], slot_at_[b + 1] - slot_at_[b]};
}

// cores_of's index: each cross-pod flow's cores grouped by slot (a counting
// sort per flow), so the searches of tier 2 read the ~n / slots cores of the
// one slot they ask about instead of every key of the flow.
void Clos3Colorer::index_cores() {
  const size_t S = static_cast<size_t>(shape_.slots());
  slot_at_.assign(flows_.size() * (S + 1), 0);
  by_slot_.resize(keys_.size());
  uint32_t at = 0;
  for (size_t i = 0; i < flows_.size(); ++i) {
    const Clos3Flow& fl = flows_[i];
    uint32_t* off = slot_at_.data() + i * (S + 1);
    for (uint32_t k = fl.at; k < fl.at + fl.n; ++k) {
      if (keys_[k].core >= 0) ++off[static_cast<size_t>(keys_[k].slot) + 1];
    }
    off[0] = at;
    for (size_t x = 1; x <= S; ++x) off[x] += off[x - 1];
    fill_.assign(off, off + S);
    for (uint32_t k = fl.at; k < fl.at + fl.n; ++k) {
      if (keys_[k].core >= 0) by_slot_[fill_[static_cast<size_t>(keys_[k].slot)]++] = keys_[k].core;
    }
    at = off[S];
  }
}

// Places unplaced flow f by a swap of slots inside one leaf pair (tier 1's
// loads stay): f with a flow of its own pair, or — when the flows holding
// f's cores are what blocks it (pinned there from other leaves) — one of
// those flows h with a flow g of h's pair, which frees h's core for f.
bool Clos3Colorer::swap_in(int f) {
  const int s = slot_[static_cast<size_t>(f)];
  const Clos3Flow& fl = flows_[static_cast<size_t>(f)];
  // Tries h <-> g (h = f: f is unplaced, so nothing to free).
  auto attempt = [&](int h, int g) {
    const int t = slot_[static_cast<size_t>(g)];
    if (t == s || cell_of_[static_cast<size_t>(g)] < 0 || !has_slot(h, t) || !has_slot(g, s)) return false;
    const size_t mark = undo_.size();
    if (h != f) move(h, -1, true);
    move(g, -1, true);
    slot_[static_cast<size_t>(h)] = t, slot_[static_cast<size_t>(g)] = s;
    bool ok = true;
    for (int x : {f, g, h}) {  // f takes h's core when h != f
      if (!ok) break;
      if (cell_of_[static_cast<size_t>(x)] >= 0) continue;
      ++search_;
      ok = augment(x);
    }
    if (ok) return true;
    rollback(mark);
    slot_[static_cast<size_t>(h)] = s, slot_[static_cast<size_t>(g)] = t;
    return false;
  };
  for (int g : pair_of(f)) {
    if (attempt(f, g)) return true;
  }
  // The cores f reaches by alternating paths (all full): what a failed
  // search visited. Any flow held there, once gone, opens a path for f.
  ++search_;
  if (augment(f)) return true;
  const unsigned visited = search_;
  const int pod = shape_.pod(fl.src_leaf);
  for (int c = 0; c < shape_.plane_size(); ++c) {
    if (seen_[cell(pod, s, c)] != visited) continue;
    held_copy_ = held_[cell(pod, s, c)];
    for (int h : held_copy_) {
      for (int g : pair_of(h)) {
        if (attempt(h, g)) return true;
      }
    }
  }
  return false;
}

std::span<const int> Clos3Colorer::pair_of(int f) const {
  const auto& [lo, hi] = pair_range_[static_cast<size_t>(f)];
  return {cross_.data() + lo, static_cast<size_t>(hi - lo)};
}

// Tier 2 for every slot at once when pods are paired; false when they are not.
bool Clos3Colorer::tier2_paired() {
  const int P = shape_.pods();
  partner_.assign(2 * static_cast<size_t>(P), -1);
  cross_.clear();
  for (size_t i = 0; i < flows_.size(); ++i) {
    const int a = shape_.pod(flows_[i].src_leaf), b = shape_.pod(flows_[i].dst_leaf);
    if (a == b) continue;
    int& to = partner_[static_cast<size_t>(a)];
    int& from = partner_[static_cast<size_t>(P + b)];
    if ((to >= 0 && to != b) || (from >= 0 && from != a)) return false;
    to = b, from = a;
    cross_.push_back(static_cast<int>(i));
  }
  held_.resize(static_cast<size_t>(P) * static_cast<size_t>(shape_.slots()) * static_cast<size_t>(shape_.plane_size()));
  for (auto& h : held_) h.clear();
  seen_.assign(held_.size(), 0);
  cell_of_.assign(flows_.size(), -1);
  undo_.clear();
  // Most constrained first: fewest cores in the chosen slot (a counting
  // sort: a flow has at most one key per core).
  const int C = shape_.plane_size();
  bucket_.assign(static_cast<size_t>(C) + 2, 0);
  ncores_.resize(cross_.size());
  for (size_t j = 0; j < cross_.size(); ++j) {
    const int f = cross_[j];
    ncores_[j] = std::min(static_cast<int>(cores_of(f, slot_[static_cast<size_t>(f)]).size()), C);
    ++bucket_[static_cast<size_t>(ncores_[j]) + 1];
  }
  for (size_t b = 1; b < bucket_.size(); ++b) bucket_[b] += bucket_[b - 1];
  order_.resize(cross_.size());
  for (size_t j = 0; j < cross_.size(); ++j) order_[static_cast<size_t>(bucket_[static_cast<size_t>(ncores_[j])]++)] = cross_[j];
  unplaced_.clear();
  for (int f : order_) {
    ++search_;
    if (!augment(f)) unplaced_.push_back(f);
    undo_.clear();
  }
  if (!unplaced_.empty()) repair_unplaced();
  for (int f : order_) core_[static_cast<size_t>(f)] = cell_of_[static_cast<size_t>(f)] % shape_.plane_size();
  return true;
}

// Swaps, then the least loaded core for what no swap placed.
void Clos3Colorer::repair_unplaced() {
  // Leaf pairs: the flows a flow may swap with.
  std::stable_sort(cross_.begin(), cross_.end(), [&](int a, int b) {
    const Clos3Flow &x = flows_[static_cast<size_t>(a)], &y = flows_[static_cast<size_t>(b)];
    return x.src_leaf != y.src_leaf ? x.src_leaf < y.src_leaf : x.dst_leaf < y.dst_leaf;
  });
  pair_range_.resize(flows_.size());
  for (size_t b = 0; b < cross_.size();) {
    size_t e = b;
    const Clos3Flow& x = flows_[static_cast<size_t>(cross_[b])];
    while (e < cross_.size() && flows_[static_cast<size_t>(cross_[e])].src_leaf == x.src_leaf &&
           flows_[static_cast<size_t>(cross_[e])].dst_leaf == x.dst_leaf) {
      ++e;
    }
    for (size_t k = b; k < e; ++k) pair_range_[static_cast<size_t>(cross_[k])] = {static_cast<int>(b), static_cast<int>(e)};
    b = e;
  }
  // Passes until one places nothing: each swap changes what the next can do.
  for (bool moved = true; moved;) {
    moved = false;
    for (int f : unplaced_) {
      if (cell_of_[static_cast<size_t>(f)] < 0 && swap_in(f)) moved = true;
      undo_.clear();
    }
  }
  // What no swap placed goes to its least loaded core (over the target).
  for (int f : unplaced_) {
    if (cell_of_[static_cast<size_t>(f)] >= 0) continue;
    const Clos3Flow& fl = flows_[static_cast<size_t>(f)];
    int best = -1;
    for (const int core : cores_of(f, slot_[static_cast<size_t>(f)])) {
      const size_t c = cell(shape_.pod(fl.src_leaf), slot_[static_cast<size_t>(f)], core);
      if (best < 0 || held_[c].size() < held_[static_cast<size_t>(best)].size()) best = static_cast<int>(c);
    }
    move(f, best, false);
  }
}

}  // namespace weft::routing
