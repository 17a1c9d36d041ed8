// weft demo --fail-during (demo_timeline.h).
#include "demo_timeline.h"

#include <algorithm>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "demo_text.h"
#include "../plot_svg.h"

namespace weft::cli::demo {

FaultSchedule::FaultSchedule(EmulatedFabric& fabric, const DemoConfig& cfg)
    : fabric_(fabric), spine_(cfg.fail_during->spine), leaf_(cfg.fail_during->leaf) {
  const auto& f = *cfg.fail_during;
  events_.push_back({f.cut_s, -1, "cut"});
  const double withdraw_s = f.cut_s + cfg.converge_ms / 1000.0;
  const bool withdraws = cfg.converge_ms > 0 && (f.restore_s == 0 || withdraw_s < f.restore_s);
  if (withdraws) events_.push_back({withdraw_s, -1, "withdrawn"});
  if (f.restore_s > 0) events_.push_back({f.restore_s, -1, "restored"});
}

FaultSchedule::~FaultSchedule() { (void)heal(); }

Status FaultSchedule::apply(const std::string& what) {
  if (what == "cut") {
    WEFT_RETURN_IF_ERROR(fabric_.cut_link(spine_, leaf_));
    cut_ = true;
  } else if (what == "withdrawn") {
    WEFT_RETURN_IF_ERROR(fabric_.fail_link(spine_, leaf_));
    withdrawn_ = true;
  } else {
    WEFT_RETURN_IF_ERROR(heal());
  }
  return ok_status();
}

Status FaultSchedule::at(double t) {
  for (FaultEvent& e : events_) {
    if (e.done_s >= 0 || t < e.at_s) continue;
    WEFT_RETURN_IF_ERROR(apply(e.what).with_context(fmt::format("fault event '{}' at {:.2f} s", e.what, t)));
    e.done_s = t;
  }
  return ok_status();
}

Status FaultSchedule::heal() {
  // Routes first, then the drop: a mended link whose routes are still
  // withdrawn carries nothing, the other way round it would drop again.
  if (withdrawn_) {
    WEFT_RETURN_IF_ERROR(fabric_.restore_link(spine_, leaf_));
    withdrawn_ = false;
  }
  if (cut_) {
    WEFT_RETURN_IF_ERROR(fabric_.mend_link(spine_, leaf_));
    cut_ = false;
  }
  return ok_status();
}

double phase_busbw(const std::vector<SeriesCall>& calls, double from_s, double to_s) {
  double bytes = 0, seconds = 0;
  for (const SeriesCall& c : calls) {
    if (c.at_s < from_s || c.at_s >= to_s) continue;
    bytes += c.busbw_Bps * c.seconds;
    seconds += c.seconds;
  }
  return seconds > 0 ? bytes / seconds : 0;
}

namespace {

// The fault's phases: [0, cut), [cut, restore), [restore, end].
struct Phases {
  double cut, restore, end;
};

Phases phases(const DemoConfig& cfg) {
  const auto& f = *cfg.fail_during;
  return {f.cut_s, f.restore_s > 0 ? f.restore_s : 1e300, 1e300};
}

std::string when(const FaultEvent& e) { return fmt::format("{} at {:.1f} s", e.what, e.done_s >= 0 ? e.done_s : e.at_s); }

}  // namespace

std::string timeline_table(const DemoConfig& cfg, const std::vector<TimelineRun>& runs) {
  const Phases p = phases(cfg);
  std::string out = fmt::format("{:<44} {:>6} {:>11} {:>11} {:>11} {:>13}\n", "run", "calls", "before cut",
                                "during", cfg.fail_during->restore_s > 0 ? "restored" : "(never)", "longest call");
  for (const TimelineRun& r : runs) {
    double longest = 0;
    for (const SeriesCall& c : r.calls) longest = std::max(longest, c.seconds);
    out += fmt::format("{:<44} {:>6} {:>11.1f} {:>11.1f} {:>11.1f} {:>11.2f} s\n", r.name, r.calls.size(),
                       mbit(phase_busbw(r.calls, 0, p.cut)), mbit(phase_busbw(r.calls, p.cut, p.restore)),
                       mbit(phase_busbw(r.calls, p.restore, p.end)), longest);
  }
  out += fmt::format("busbw in Mbit/s over the calls that started in each phase (links {} Mbit/s); events of the last "
                     "run: ",
                     cfg.rate_mbit);
  std::vector<std::string> ev;
  for (const FaultEvent& e : runs.back().events) ev.push_back(when(e));
  return out + fmt::format("{}\n", fmt::join(ev, ", "));
}

std::string timeline_svg(const DemoConfig& cfg, const std::vector<TimelineRun>& runs) {
  std::vector<PlotSeries> series;
  for (const TimelineRun& r : runs) {
    PlotSeries s{r.name, {}, {}};
    for (const SeriesCall& c : r.calls) {
      s.x.push_back(c.at_s + c.seconds);  // a call is known when it ends: a stall is a late, low point
      s.y.push_back(mbit(c.busbw_Bps));
    }
    series.push_back(std::move(s));
  }
  PlotAxes axes;
  axes.log2_x = false;
  for (const FaultEvent& e : runs.back().events) axes.markers.push_back({e.done_s >= 0 ? e.done_s : e.at_s, e.what});
  const auto& f = *cfg.fail_during;
  return line_plot_svg(fmt::format("HD AllReduce of {} MiB, spine {} - leaf {} fails mid-job",
                                   static_cast<double>(cfg.call_bytes) / (1 << 20), f.spine, f.leaf),
                       "time (s), each call plotted when it ended", "busbw (Mbit/s)", series, axes);
}

std::string timeline_json(const DemoConfig& cfg, const std::vector<TimelineRun>& runs, const nlohmann::json& extra) {
  const auto& f = *cfg.fail_during;
  nlohmann::json j = {{"link", {{"spine", f.spine}, {"leaf", f.leaf}}},
                      {"call_bytes", cfg.call_bytes},
                      {"rate_mbit", cfg.rate_mbit},
                      {"runs", nlohmann::json::array()}};
  for (const TimelineRun& r : runs) {
    nlohmann::json run = {{"name", r.name}, {"calls", nlohmann::json::array()}, {"events", nlohmann::json::array()}};
    for (const SeriesCall& c : r.calls) {
      run["calls"].push_back(
          {{"at_s", c.at_s}, {"seconds", c.seconds}, {"busbw_mbit", mbit(c.busbw_Bps)}, {"epoch", c.epoch}});
    }
    for (const FaultEvent& e : r.events) run["events"].push_back({{"what", e.what}, {"planned_s", e.at_s}, {"at_s", e.done_s}});
    j["runs"].push_back(std::move(run));
  }
  for (const auto& [k, v] : extra.items()) j[k] = v;
  return j.dump(1) + "\n";
}

}  // namespace weft::cli::demo
