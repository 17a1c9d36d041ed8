// Which 5-tuples `weft watch` has the agents probe: the job's planned flows
// (their own 5-tuple when the probe database holds it, else a probed port of
// the same host pair on the same spine: the path is what is watched) and,
// for the rest of the fabric, `per_spine` probed ports on every spine of every
// ordered leaf pair, spread over the leaves' hosts. Every tuple's forward
// path is known from the probe database: {leaf of src, spine, leaf of dst}.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/agent/controller.h"
#include "weft/common/status.h"
#include "weft/db/database.h"
#include "weft/routing/plan.h"

namespace weft::cli {

struct ProbedTuple {
  int src = 0, dst = 0;  // host indices
  uint16_t sport = 0;
  int spine = 0;  // >= 1 (same-leaf tuples cross no spine and are not watched)
};

// What a probe campaign says about the hosts of the hosts file.
struct WatchFabric {
  std::vector<int> host_leaf;  // per host, 1-based leaf number; 0 = unknown
  int leaves = 0, spines = 0;
  uint16_t dport = 4791;       // the campaign's probe port
  std::vector<ProbedTuple> probed;
};

// The newest finished UDP campaign of fabric.db, for `hosts` (by name).
Result<WatchFabric> load_watch_fabric(db::Database& db, const std::vector<agent::HostEntry>& hosts);

struct WatchTuple {
  int src = 0, dst = 0;
  uint16_t sport = 0;
  int spine = 0;
  int src_leaf = 0, dst_leaf = 0;
  bool planned = false;
};

// Planned tuples first (plan flows between hosts of the list; a flow whose
// path names no spine is on one leaf and skipped), then the fabric's. Every
// (src, dst, sport) at most once. Fails naming a planned flow no probed port
// can stand for.
Result<std::vector<WatchTuple>> choose_watch_tuples(const WatchFabric& f, const std::vector<agent::HostEntry>& hosts,
                                                    const routing::RoutePlan* plan, int per_spine);

}  // namespace weft::cli
