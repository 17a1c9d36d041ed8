// Logical -> physical rank remapping around failed direct links (e.g. an
// 8-rank butterfly on a full mesh whose rank0-rank1 link is cut runs on the
// map physical = (logical + 1) mod 8, under which logical ranks 7 and 0 —
// which never talk in a butterfly — sit on the cut link).
//
// Generalised: given the logical pairs an algorithm talks over and the
// physical pairs that must not talk directly, find a permutation that puts
// no talking pair on a failed link. Rotations and reflections are tried
// first (cheap, and they keep neighbours together, which leaf-set rankings
// rely on); then a depth-first search with a node budget.
#pragma once

#include <utility>
#include <vector>

#include "weft/collectives/communicator.h"

namespace weft::coll::internal {

// The pairs (a < b) of group indices that `a` talks over for n ranks.
std::vector<std::pair<int, int>> talking_pairs(Algorithm a, int n);

// map[logical] = physical. Identity when `failed` is empty.
Result<std::vector<int>> remap_avoiding(Algorithm a, int n,
                                        const std::vector<std::pair<int, int>>& failed);

// Hybrid's order (remap_hybrid.cc): whole hosts reordered, each host's ranks
// in rank order, so that no talking pair sits on a failed link. host_of by
// rank, as Shape::host_of; an error when hosts differ in size or no order
// exists.
Result<std::vector<int>> remap_hybrid(const std::vector<int>& host_of,
                                      const std::vector<std::pair<int, int>>& failed);

}  // namespace weft::coll::internal
