// Rail ranking for multi-NIC hosts: rank = (host, local rank).
//
// Hierarchical collectives run intra-host first, then across hosts between
// equal local ranks (NCCL's rail-aligned "PXN"-free pattern; the hybrid
// AllReduce of collectives/). On a rail fabric (NVIDIA DGX SuperPOD
// reference architecture) local rank g of every host should use NIC g, so
// each cross-host exchange between equal local ranks stays on rail g, and on
// a multi-plane fabric (Alibaba HPN, SIGCOMM 2024) on one plane. Hence:
//   - a host's NICs get consecutive ranks (local ranks are contiguous, which
//     torchrun and Open MPI's "slot" need), ordered by (plane, rail, NIC
//     index): local rank l is then the same (plane, rail) on every host that
//     has all its NICs, and halving-doubling's largest messages (distance 1)
//     stay on one plane;
//   - hosts whose allocated NICs sit on the same leaves (one rail leaf per
//     rail when a rail needs several leaves) are kept together, in host
//     order, hosts with the most NICs first and among them the group with
//     the most NICs first, as the contiguous leaf sets
//     (leaf_sets.cc) do: equal local ranks of nearby hosts then meet under
//     one leaf of their rail.
#include <algorithm>
#include <map>

#include "weft/ranking/rank_order.h"

namespace weft::ranking {

RankOrder rank_rail(const topo::Fabric& f, const std::vector<int>& allocation) {
  std::map<int, std::vector<int>> by_host;
  for (int n : allocation) by_host[f.nics[static_cast<size_t>(n)].host].push_back(n);
  auto nic_key = [&](int n) {
    return std::tuple(f.nic_plane(n), f.nic_rail(n), f.nics[static_cast<size_t>(n)].index_on_host);
  };
  struct Group {
    std::vector<int> leaves;               // the leaf of each NIC, in local-rank order
    std::vector<std::vector<int>> hosts;   // each host's NICs in local-rank order
    size_t nics = 0;
  };
  std::vector<Group> groups;
  std::map<std::vector<int>, size_t> group_of;
  for (auto& [host, nics] : by_host) {
    std::sort(nics.begin(), nics.end(), [&](int a, int b) { return nic_key(a) < nic_key(b); });
    std::vector<int> leaves;
    for (int n : nics) leaves.push_back(f.nic_switch(n));
    auto [it, inserted] = group_of.try_emplace(leaves, groups.size());
    if (inserted) groups.push_back({std::move(leaves), {}, 0});
    groups[it->second].hosts.push_back(nics);
    groups[it->second].nics += nics.size();
  }
  // Hosts with the most NICs first, so that they start at multiples of their
  // NIC count and stay aligned (a partial host before them would shift every
  // later host's local ranks); then the largest group.
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    const size_t pa = a.leaves.size(), pb = b.leaves.size();
    return pa != pb ? pa > pb : a.nics > b.nics;
  });
  RankOrder order;
  order.nics.reserve(allocation.size());
  for (const auto& g : groups) {
    for (const auto& h : g.hosts) order.nics.insert(order.nics.end(), h.begin(), h.end());
  }
  return order;
}

}  // namespace weft::ranking
