// The peers of plans (algorithms.h, Plan::peers): the helpers the
// algorithms share.
#include <algorithm>

#include "algorithms/algorithms.h"

namespace weft::coll::internal {

std::vector<int> peer_set(std::vector<int> ranks, int me) {
  ranks.erase(std::remove(ranks.begin(), ranks.end(), me), ranks.end());
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

std::vector<int> ring_peers(int rank, int size) {
  if (size < 2) return {};
  return peer_set({(rank + size - 1) % size, (rank + 1) % size}, rank);
}

}  // namespace weft::coll::internal
