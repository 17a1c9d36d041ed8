// render_watch_metrics (watch_metrics.h).
#include "watch/watch_metrics.h"

#include <fmt/format.h>

#include "weft/agent/metrics.h"

namespace weft::cli {

namespace {

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string render_watch_metrics(const WatchCounts& c, const WatchTotals& t) {
  std::string o;
  family(o, "weft_watch_tuples", "gauge", "5-tuples watched, by health (healthy, failing, unknown).");
  o += fmt::format("weft_watch_tuples{{health=\"healthy\"}} {}\n", c.healthy);
  o += fmt::format("weft_watch_tuples{{health=\"failing\"}} {}\n", c.failing);
  o += fmt::format("weft_watch_tuples{{health=\"unknown\"}} {}\n", c.unknown);
  family(o, "weft_watch_probes_total", "counter", "Monitor probes of the watched 5-tuples, by outcome.");
  o += fmt::format("weft_watch_probes_total{{outcome=\"sent\"}} {}\n", c.sent);
  o += fmt::format("weft_watch_probes_total{{outcome=\"answered\"}} {}\n", c.answered);
  o += fmt::format("weft_watch_probes_total{{outcome=\"lost\"}} {}\n", c.lost);
  family(o, "weft_watch_link_down", "gauge", "1 for the directed link now localised as down.");
  if (c.down) o += fmt::format("weft_watch_link_down{{link=\"{}\"}} 1\n", agent::escape_label_value(*c.down));
  family(o, "weft_watch_events_total", "counter", "Verdicts acted on, by kind (down, up, ambiguous, unexplained).");
  o += fmt::format("weft_watch_events_total{{kind=\"down\"}} {}\n", t.down_events);
  o += fmt::format("weft_watch_events_total{{kind=\"up\"}} {}\n", t.up_events);
  o += fmt::format("weft_watch_events_total{{kind=\"ambiguous\"}} {}\n", t.ambiguous);
  o += fmt::format("weft_watch_events_total{{kind=\"unexplained\"}} {}\n", t.unexplained);
  family(o, "weft_watch_localise_seconds", "gauge", "First reported loss to localisation, of the newest down link.");
  o += fmt::format("weft_watch_localise_seconds {:.6f}\n", t.last_localise_seconds);
  return o;
}

}  // namespace weft::cli
