// A host-aware order for hybrid AllReduce around failed links
// (allreduce_hybrid.cc). Hybrid talks over two kinds of pair: neighbours of
// each host's ring (reduce-scatter and allgather, ranks of one host) and HD
// partners among the hosts for each local index (ranks of equal local index
// on different hosts). A failed link between two hosts therefore matters
// only when its ends have the same local index, and only if those hosts
// become HD partners: the hosts are reordered as remap_avoiding reorders the
// ranks of HD, with a host pair "failed" when any such link joins them.
// Ranks of one host keep their order (the local index decides which chunk a
// rank carries across): a failed link inside a host's ring is refused.
#include <set>

#include <fmt/format.h>

#include "algorithms/algorithms.h"
#include "remap.h"

namespace weft::coll::internal {

Result<std::vector<int>> remap_hybrid(const std::vector<int>& host_of,
                                      const std::vector<std::pair<int, int>>& failed) {
  const std::vector<std::vector<int>> hosts = equal_hosts(host_of);
  if (hosts.empty()) {
    return failed_precondition("allreduce: hybrid needs the same number of ranks on every host");
  }
  const int n = static_cast<int>(host_of.size());
  const int m = static_cast<int>(hosts.front().size());
  std::vector<int> host_at(static_cast<size_t>(n)), local_at(static_cast<size_t>(n));
  for (size_t h = 0; h < hosts.size(); ++h) {
    for (int l = 0; l < m; ++l) {
      host_at[static_cast<size_t>(hosts[h][static_cast<size_t>(l)])] = static_cast<int>(h);
      local_at[static_cast<size_t>(hosts[h][static_cast<size_t>(l)])] = l;
    }
  }
  std::set<std::pair<int, int>> host_pairs;
  for (auto [x, y] : failed) {
    if (x < 0 || y < 0 || x >= n || y >= n || x == y) continue;  // CommConfig::validate names these
    const int hx = host_at[static_cast<size_t>(x)], hy = host_at[static_cast<size_t>(y)];
    const int lx = local_at[static_cast<size_t>(x)], ly = local_at[static_cast<size_t>(y)];
    if (hx == hy) {
      const int d = (lx - ly + m) % m;
      if (d == 1 || d == m - 1) {
        return failed_precondition(fmt::format(
            "hybrid allreduce cannot avoid the failed link {}-{}: both ranks are on one host and neighbours in its "
            "ring (local ranks {} and {} of {})",
            x, y, lx, ly, m));
      }
      continue;
    }
    if (lx == ly) host_pairs.insert({std::min(hx, hy), std::max(hx, hy)});
  }
  std::vector<int> map(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) map[static_cast<size_t>(r)] = r;
  // Nothing to avoid: the identity, not the hosts laid end to end. The two
  // run alike, but only the identity is the group a route plan's gates bind
  // (communicator.cc execute), and hosts need not be blocks of ranks.
  if (host_pairs.empty()) return map;
  auto host_map = remap_avoiding(Algorithm::kHalvingDoubling, static_cast<int>(hosts.size()),
                                 {host_pairs.begin(), host_pairs.end()});
  if (!host_map) {
    return failed_precondition(fmt::format(
        "no order of {} hosts keeps hybrid allreduce's halving-doubling between hosts off the {} failed link(s) "
        "that join ranks of equal local index",
        hosts.size(), host_pairs.size()));
  }
  bool moved = false;
  for (size_t h = 0; h < host_map->size(); ++h) moved = moved || (*host_map)[h] != static_cast<int>(h);
  if (!moved) return map;
  map.clear();
  for (int h : *host_map) map.insert(map.end(), hosts[static_cast<size_t>(h)].begin(), hosts[static_cast<size_t>(h)].end());
  return map;
}

}  // namespace weft::coll::internal
