// Contiguous leaf-set ranking (ACCL, Dong et al., IEEE Micro 2021, "Topology-Aware Ranking").
//
// Subnodes on one leaf get consecutive ranks. In a halving-doubling step of
// distance d >= set size M, set i then talks only to set i XOR d/M: one flow
// per host pair and M flows leaving each leaf, which the route planner gives
// M different spines. Recursive halving starts at distance 1, so the largest
// messages stay inside a leaf (Gloo's "first partner is rank^1" rationale).
//
// Real allocations are partial and uneven. Sets are ordered by size, largest
// first: every set then starts at a multiple of the largest power of two that
// divides all sets before it, which keeps aligned HD blocks (r XOR d for small
// d) inside one leaf as often as the sizes allow. On 3 tiers, pods are kept
// together (largest pod first) so the most steps stay under one aggregation
// layer. Inside a set, NICs follow host then NIC order: a multi-NIC host's
// subnodes are neighbours and its distance-1 exchange never leaves the leaf.
#include <algorithm>
#include <map>

#include "leaf_sets.h"
#include "weft/ranking/rank_order.h"

namespace weft::ranking {
namespace internal {

std::vector<LeafSet> group_by_leaf(const topo::Fabric& f, const std::vector<int>& allocation) {
  std::map<int, LeafSet> by_leaf;
  for (int n : allocation) {
    int sw = f.nic_switch(n);
    auto [it, inserted] = by_leaf.try_emplace(sw, LeafSet{f.switches[sw].pod, sw, {}});
    it->second.nics.push_back(n);
  }
  std::vector<LeafSet> out;
  out.reserve(by_leaf.size());
  for (auto& [sw, set] : by_leaf) {
    std::sort(set.nics.begin(), set.nics.end(), [&](int a, int b) {
      const auto& na = f.nics[a];
      const auto& nb = f.nics[b];
      if (na.host != nb.host) return na.host < nb.host;
      return na.index_on_host < nb.index_on_host;
    });
    out.push_back(std::move(set));
  }
  return out;
}

}  // namespace internal

RankOrder rank_leaf_sets(const topo::Fabric& f, const std::vector<int>& allocation) {
  auto sets = internal::group_by_leaf(f, allocation);
  std::map<int, size_t> pod_size;
  for (const auto& s : sets) pod_size[s.pod] += s.nics.size();
  std::stable_sort(sets.begin(), sets.end(), [&](const auto& a, const auto& b) {
    if (a.pod != b.pod) {
      size_t pa = pod_size[a.pod], pb = pod_size[b.pod];
      if (pa != pb) return pa > pb;
      return a.pod < b.pod;
    }
    return a.nics.size() > b.nics.size();
  });
  RankOrder order;
  order.nics.reserve(allocation.size());
  for (const auto& s : sets) order.nics.insert(order.nics.end(), s.nics.begin(), s.nics.end());
  return order;
}

}  // namespace weft::ranking
