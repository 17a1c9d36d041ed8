// weft demo --fail-during, run (c): weft's order and plan, watched and
// re-planned while the job runs.
//
// Before the timeline, a UDP (DSCP) campaign over the job's hosts gives
// `weft watch` its paths; the watcher then runs on the first host with the
// job's plan and `--publish`, and every rank names the same plan epochs file
// (docs/collectives-routes.md "Plan epochs"). The cut, the withdrawal and the
// restore are the same FaultSchedule as (a) and (b). What the watcher prints
// (cmd_watch.cc: `down`, `published epoch`, `up`) and the epoch every call
// ended on become the run's events:
//   localised s2->l3   the watcher named the link (its localised_us);
//   epoch 1 published  the re-plan was in the file;
//   epoch 1 adopted    the end of the first call that ended on epoch 1 — an
//                      upper bound on when every rank ran it (ranks switch
//                      at the same call, so one rank's calls tell).
#pragma once

#include <string>
#include <vector>

#include "demo_config.h"
#include "demo_session.h"
#include "demo_timeline.h"
#include "weft/ranking/rank_order.h"
#include "weft/topology/fabric.h"

namespace weft::cli::demo {

// Seconds after the cut (or the restore), -1 when it did not happen.
struct LiveFigures {
  double localised_s = -1, published_s = -1, adopted_s = -1;
  double back_published_s = -1, back_adopted_s = -1;
  double busbw_switched = 0;  // calls that started after the adoption, before the restore
  double busbw_back = 0;      // calls that started after the re-adoption
  double ideal_failed = 0;    // the best plan on the fabric without the link, simulated
  double ideal_intact = 0;
};

// Runs (c) on `hosts` (rank order) with the plan at `plan_path`.
Result<TimelineRun> run_live(DemoSession& s, const DemoConfig& cfg, const std::string& dir,
                             const std::vector<std::string>& hosts, const std::string& plan_path);

// The watcher's lines as events, in seconds after the series started at
// `start_ns` (CLOCK_REALTIME), and an `epoch N adopted` event per epoch
// change in `calls`.
std::vector<FaultEvent> live_events(const std::string& watch_out, int64_t start_ns,
                                    const std::vector<SeriesCall>& calls);

// The figures of run (c); the ideals are the plans simulated on `fabric`
// intact and without the cut link (found by the emulated names: spine
// s<spine>, the leaf of host h<leaf>-1).
Result<LiveFigures> live_figures(const DemoConfig& cfg, const TimelineRun& run, const topo::Fabric& fabric,
                                 const ranking::RankOrder& order, const std::string& db_path, const std::string& dir);

std::string live_summary(const DemoConfig& cfg, const LiveFigures& f);
// {"live": {...}}: the figures, -1 for what did not happen, busbw in Mbit/s.
nlohmann::json live_json(const LiveFigures& f);

}  // namespace weft::cli::demo
