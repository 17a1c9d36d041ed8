#include "weft/routing/clos3_bound.h"

#include <algorithm>

namespace weft::routing {
namespace {

// One side (up: flows grouped by source leaf; down: by destination leaf).
class Side {
 public:
  Side(const Clos3Shape& shape, std::span<const Clos3Flow> flows, std::span<const Clos3Key> keys, bool up)
      : shape_(shape), up_(up), S_(static_cast<size_t>(shape.slots())), C_(static_cast<size_t>(shape.plane_size())) {
    const size_t ns = static_cast<size_t>(shape.num_switches());
    pos_.assign(ns, -1);
    flows_of_.assign(ns, 0);
    inside_.assign(ns, 0);
    leaves_.assign(static_cast<size_t>(shape.pods()), {});
    for (const Clos3Flow& fl : flows) {
      const int leaf = up ? fl.src_leaf : fl.dst_leaf;
      ++flows_of_[static_cast<size_t>(leaf)];
      if (shape.pod(fl.src_leaf) == shape.pod(fl.dst_leaf)) ++inside_[static_cast<size_t>(leaf)];
      if (pos_[static_cast<size_t>(leaf)] < 0) {
        auto& in_pod = leaves_[static_cast<size_t>(shape.pod(leaf))];
        pos_[static_cast<size_t>(leaf)] = static_cast<int>(in_pod.size());
        in_pod.push_back(leaf);
      }
    }
    // reach_[pod][slot]: leaves of the pod x cores, 1 where a cross-pod flow
    // of the leaf has the key (slot, core).
    reach_.assign(leaves_.size() * S_, {});
    for (size_t p = 0; p < leaves_.size(); ++p) {
      for (size_t s = 0; s < S_; ++s) reach_[p * S_ + s].assign(leaves_[p].size() * C_, 0);
    }
    for (const Clos3Flow& fl : flows) {
      if (shape.pod(fl.src_leaf) == shape.pod(fl.dst_leaf)) continue;
      const int leaf = up ? fl.src_leaf : fl.dst_leaf;
      const size_t p = static_cast<size_t>(shape.pod(leaf)), at = static_cast<size_t>(pos_[static_cast<size_t>(leaf)]) * C_;
      for (uint32_t k = fl.at; k < fl.at + fl.n; ++k) {
        reach_[p * S_ + static_cast<size_t>(keys[k].slot)][at + static_cast<size_t>(keys[k].core)] = 1;
      }
    }
  }

  // True when every (pod, slot) carries its forced flows at load K; else
  // fills w with the first that does not.
  bool feasible(int K, Clos3BoundWitness& w) {
    for (size_t p = 0; p < leaves_.size(); ++p) {
      const auto& ls = leaves_[p];
      need_.resize(ls.size());
      int total = 0;
      for (size_t i = 0; i < ls.size(); ++i) {
        const auto l = static_cast<size_t>(ls[i]);
        const long m = static_cast<long>(flows_of_[l]) - static_cast<long>(S_ - 1) * K - inside_[l];
        need_[i] = static_cast<int>(std::max(0L, m));
        total += need_[i];
      }
      if (total == 0) continue;
      for (size_t s = 0; s < S_; ++s) {
        if (carried(p, s, K) == total) continue;
        w.up = up_, w.pod = static_cast<int>(p), w.slot = static_cast<int>(s);
        w.leaves.clear(), w.cores.clear(), w.forced = 0;
        // The min cut: leaves still reachable from the source in the residual
        // network, and the cores they reach (all full).
        for (size_t i = 0; i < ls.size(); ++i) {
          if (mark_[i] == stamp_) w.leaves.push_back(ls[i]), w.forced += need_[i];
        }
        for (size_t c = 0; c < C_; ++c) {
          bool any = false;
          for (size_t i = 0; i < ls.size() && !any; ++i) any = mark_[i] == stamp_ && reach_[p * S_ + s][i * C_ + c];
          if (any) w.cores.push_back(static_cast<int>(c));
        }
        return false;
      }
    }
    return true;
  }

 private:
  // Maximum flow of (pod p, slot s) by augmenting paths (Ford & Fulkerson):
  // source -> leaf i (need_[i]) -> core c (reach) -> sink (K).
  int carried(size_t p, size_t s, int K) {
    const size_t L = leaves_[p].size();
    const auto& reach = reach_[p * S_ + s];
    left_.assign(need_.begin(), need_.end());
    room_.assign(C_, K);
    on_.assign(L * C_, 0);  // flow leaf i -> core c
    mark_.assign(L, 0);
    core_mark_.assign(C_, 0);
    stamp_ = 0;
    int total = 0;
    for (size_t i = 0; i < L; ++i) {
      while (left_[i] > 0) {
        ++stamp_;
        const int pushed = push(i, left_[i], reach, L);
        if (pushed == 0) break;
        left_[i] -= pushed, total += pushed;
      }
    }
    // Marks for the witness: what the unplaced leaves reach in the residual
    // network (every core there is full, and only those leaves fill it).
    ++stamp_;
    for (size_t i = 0; i < L; ++i) {
      if (left_[i] > 0) visit(i, reach, L);
    }
    return total;
  }

  // Pushes up to `amount` from leaf i to the sink; returns what it pushed.
  int push(size_t i, int amount, const std::vector<char>& reach, size_t L) {
    mark_[i] = stamp_;
    int pushed = 0;
    for (size_t c = 0; c < C_ && pushed < amount; ++c) {
      if (!reach[i * C_ + c] || core_mark_[c] == stamp_) continue;
      core_mark_[c] = stamp_;
      if (room_[c] > 0) {
        const int d = std::min(amount - pushed, room_[c]);
        room_[c] -= d, on_[i * C_ + c] += d, pushed += d;
        continue;
      }
      // Core c is full: move some of what another leaf j sends there on.
      for (size_t j = 0; j < L && pushed < amount; ++j) {
        if (j == i || on_[j * C_ + c] == 0 || mark_[j] == stamp_) continue;
        const int d = push(j, std::min(amount - pushed, on_[j * C_ + c]), reach, L);
        on_[j * C_ + c] -= d, on_[i * C_ + c] += d, pushed += d;
      }
    }
    return pushed;
  }

  // Residual reachability from leaf i (for the witness).
  void visit(size_t i, const std::vector<char>& reach, size_t L) {
    if (mark_[i] == stamp_) return;
    mark_[i] = stamp_;
    for (size_t c = 0; c < C_; ++c) {
      if (!reach[i * C_ + c] || core_mark_[c] == stamp_) continue;
      core_mark_[c] = stamp_;
      for (size_t j = 0; j < L; ++j) {
        if (on_[j * C_ + c] > 0) visit(j, reach, L);
      }
    }
  }

  const Clos3Shape& shape_;
  bool up_;
  size_t S_, C_;
  std::vector<int> pos_, flows_of_, inside_;
  std::vector<std::vector<int>> leaves_;    // per pod
  std::vector<std::vector<char>> reach_;    // per (pod, slot)
  std::vector<int> need_, left_, room_, on_;
  std::vector<unsigned> mark_, core_mark_;
  unsigned stamp_ = 0;
};

}  // namespace

Clos3Bound clos3_reach_bound(const Clos3Shape& shape, std::span<const Clos3Flow> flows, std::span<const Clos3Key> keys,
                             int from) {
  Clos3Bound out;
  out.load = std::max(from, 1);
  if (shape.slots() < 2 || shape.plane_size() == 0) return out;
  Side up(shape, flows, keys, true), down(shape, flows, keys, false);
  Clos3BoundWitness w;
  // Each failing K raises the bound by one; the forced counts fall by S - 1
  // per step, so a few tests settle it.
  while (!up.feasible(out.load, w) || !down.feasible(out.load, w)) {
    out.witness = w;
    ++out.load;
  }
  return out;
}

}  // namespace weft::routing
