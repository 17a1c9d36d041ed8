// `weft watch --metrics`: its state in the Prometheus text format, like the
// agent's (agent/weft/agent/metrics.h); every metric is in docs/metrics.md.
#pragma once

#include <cstdint>
#include <string>

#include "watch/watch_state.h"

namespace weft::cli {

struct WatchTotals {
  uint64_t down_events = 0;  // links declared down since the start
  uint64_t up_events = 0;
  uint64_t ambiguous = 0;    // verdicts that named several candidates
  uint64_t unexplained = 0;
  double last_localise_seconds = 0;  // first loss -> localised, of the newest down event
};

std::string render_watch_metrics(const WatchCounts& c, const WatchTotals& t);

}  // namespace weft::cli
