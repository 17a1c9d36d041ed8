// Grouping helpers shared by the leaf-set and ring rankers (internal).
#pragma once

#include <vector>

#include "weft/topology/fabric.h"

namespace weft::ranking::internal {

// One leaf's share of an allocation, NICs sorted by (host, NIC on host).
struct LeafSet {
  int pod;     // -1 outside 3-tier fabrics
  int leaf;    // switch index
  std::vector<int> nics;
};

// Groups the allocation by attachment switch, in switch index order.
std::vector<LeafSet> group_by_leaf(const topo::Fabric& f, const std::vector<int>& allocation);

}  // namespace weft::ranking::internal
