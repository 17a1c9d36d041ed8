// Ring order: leaf by leaf, pod by pod.
//
// A ring's every step moves one chunk between each pair of neighbours, so the
// only cost the order controls is how many neighbour pairs sit on different
// leaves. Visiting each leaf's subnodes consecutively gives exactly one
// crossing per non-empty leaf (the minimum whenever more than one leaf is
// used), and keeping a pod's leaves together makes pod crossings minimal too.
// Unlike the HD leaf-set order, set sizes do not matter here, so leaves stay
// in fabric order — the ring reads like the rack layout.
#include <algorithm>

#include "leaf_sets.h"
#include "weft/ranking/rank_order.h"

namespace weft::ranking {

RankOrder rank_ring(const topo::Fabric& f, const std::vector<int>& allocation) {
  auto sets = internal::group_by_leaf(f, allocation);
  std::stable_sort(sets.begin(), sets.end(), [](const auto& a, const auto& b) { return a.pod < b.pod; });
  RankOrder order;
  order.nics.reserve(allocation.size());
  for (const auto& s : sets) order.nics.insert(order.nics.end(), s.nics.begin(), s.nics.end());
  return order;
}

}  // namespace weft::ranking
