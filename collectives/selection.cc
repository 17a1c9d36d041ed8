// kAuto's AllReduce choice (communicator.h: Selection). The default rules
// are the crossovers bench/allreduce_sweep.sh measured on this machine —
// 2 cores, loopback TCP and shared memory, under load from other work — as
// recorded in docs/collectives.md "Selection" (the measured table and its
// crossovers). tests/collectives/selection_test.cc checks, row by row of that
// table, that these rules pick an algorithm within 10% of the fastest.
#include <climits>

#include <fmt/format.h>

#include "weft/collectives/communicator.h"

namespace weft::coll {

std::vector<SelectionRule> default_selection_rules() {
  return {
      {"tcp", INT_MAX, 16 << 10, SIZE_MAX},
      {"shm", INT_MAX, 16 << 10, SIZE_MAX},
      {"*", INT_MAX, 16 << 10, SIZE_MAX},
  };
}

Status Selection::validate() const {
  if (rules.empty() || rules.back().transport != "*" || rules.back().max_ranks != INT_MAX) {
    return invalid_argument("selection: the last rule must cover every transport and size (\"*\", INT_MAX ranks)");
  }
  for (const SelectionRule& r : rules) {
    if (r.max_ranks < 1) return invalid_argument(fmt::format("selection: rule for '{}' has max_ranks {} < 1", r.transport, r.max_ranks));
    if (r.ring_min_bytes < r.hd_min_bytes) {
      return invalid_argument(fmt::format("selection: rule for '{}' up to {} ranks has ring_min_bytes {} below hd_min_bytes {}",
                                          r.transport, r.max_ranks, r.ring_min_bytes, r.hd_min_bytes));
    }
  }
  return Status::ok();
}

Algorithm select_allreduce(const Selection& s, std::string_view transport, int ranks, size_t bytes, bool equal_hosts) {
  if (s.hybrid_when_multi_host && equal_hosts) return Algorithm::kHybrid;
  for (const SelectionRule& r : s.rules) {
    if ((r.transport == "*" || r.transport == transport) && ranks <= r.max_ranks) {
      return bytes < r.hd_min_bytes ? Algorithm::kButterfly
             : bytes >= r.ring_min_bytes ? Algorithm::kRing
                                         : Algorithm::kHalvingDoubling;
    }
  }
  return Algorithm::kHalvingDoubling;  // unreachable once validate() passed
}

}  // namespace weft::coll
