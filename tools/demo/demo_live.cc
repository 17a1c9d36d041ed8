// weft demo --fail-during, run (c) (demo_live.h).
#include "demo_live.h"

#include <algorithm>
#include <cstdio>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "demo_text.h"
#include "demo_plan.h"

namespace weft::cli::demo {

namespace {

constexpr int kWatchPorts = 16;  // per pair: every spine seen for every leaf pair (4 spines)
const char* const kJob = "demo-timeline";

// The first event whose name holds `what` at or after `from` and before
// `to`, -1 if none.
double first_at(const std::vector<FaultEvent>& ev, const std::string& what, double from, double to = 1e300) {
  for (const FaultEvent& e : ev) {
    if (e.what.find(what) != std::string::npos && e.done_s >= from && e.done_s < to) return e.done_s;
  }
  return -1;
}

}  // namespace

std::vector<FaultEvent> live_events(const std::string& watch_out, int64_t start_ns,
                                    const std::vector<SeriesCall>& calls) {
  static const std::regex kDown(R"(^down (\S+) first_loss_us=\d+ localised_us=(\d+))");
  static const std::regex kPublished(R"(^published epoch (\d+) .*published_us=(\d+))");
  static const std::regex kUp(R"(^up (\S+) restored_us=(\d+))");
  static const std::regex kOther(R"(^(ambiguous|unexplained))");
  std::vector<FaultEvent> out;
  auto at = [start_ns](const std::string& us) { return (std::stod(us) * 1e3 - static_cast<double>(start_ns)) / 1e9; };
  std::istringstream in(watch_out);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, kDown)) {
      const double t = at(m[2]);
      out.push_back({t, t, "localised " + m[1].str()});
    } else if (std::regex_search(line, m, kPublished)) {
      const double t = at(m[2]);
      out.push_back({t, t, fmt::format("epoch {} published", m[1].str())});
    } else if (std::regex_search(line, m, kUp)) {
      const double t = at(m[2]);
      out.push_back({t, t, "seen up " + m[1].str()});
    } else if (std::regex_search(line, m, kOther)) {
      out.push_back({-1, -1, m[1].str()});  // no time printed: listed, not placed
    }
  }
  uint64_t epoch = calls.empty() ? 0 : calls.front().epoch;  // the job's own plan
  for (const SeriesCall& c : calls) {
    if (c.epoch == epoch) continue;
    epoch = c.epoch;
    const double t = c.at_s + c.seconds;
    out.push_back({t, t, fmt::format("epoch {} adopted", epoch)});
  }
  return out;
}

Result<TimelineRun> run_live(DemoSession& s, const DemoConfig& cfg, const std::string& dir,
                             const std::vector<std::string>& hosts, const std::string& plan_path) {
  WEFT_ASSIGN_OR_RETURN(ProbeRun p, s.probe_udp(hosts, kWatchPorts));
  fmt::print("  watch: UDP campaign {} for the watcher ({} flows, {:.1f} s); weft watch --publish on {}\n", p.campaign,
             p.flows, p.seconds, hosts.front());
  std::fflush(stdout);
  const std::string epochs = dir + "/plan-epochs.json";
  (void)std::remove(epochs.c_str());
  WEFT_ASSIGN_OR_RETURN(pid_t watch, s.start_watch(plan_path, epochs, kJob));
  FaultSchedule faults(s.fabric(), cfg);
  auto calls = s.series(hosts, plan_path, "(c)", [&](double t) { return faults.at(t); }, epochs, kJob);
  Status healed = faults.heal();
  auto text = s.stop_watch(watch);
  if (!calls) return calls.status();
  WEFT_RETURN_IF_ERROR(healed);
  if (!text) return text.status().with_context("weft watch's output");
  TimelineRun run{"(c) weft order + plan, re-planned live", std::move(*calls), faults.events()};
  for (FaultEvent& e : live_events(*text, s.series_start_ns(), run.calls)) run.events.push_back(std::move(e));
  std::stable_sort(run.events.begin(), run.events.end(),
                   [](const FaultEvent& a, const FaultEvent& b) { return a.done_s < b.done_s; });
  return run;
}

Result<LiveFigures> live_figures(const DemoConfig& cfg, const TimelineRun& run, const topo::Fabric& fabric,
                                 const ranking::RankOrder& order, const std::string& db_path, const std::string& dir) {
  const auto& fd = *cfg.fail_during;
  LiveFigures f;
  const double cut = first_at(run.events, "cut", 0);
  const double restore = fd.restore_s > 0 ? first_at(run.events, "restored", 0) : -1;
  auto after = [](double t, double from) { return t >= 0 && from >= 0 ? t - from : -1; };
  const double until = restore >= 0 ? restore : 1e300;
  f.localised_s = after(first_at(run.events, "localised", cut, until), cut);
  f.published_s = after(first_at(run.events, "published", cut, until), cut);
  const double adopted = first_at(run.events, "adopted", cut, until);
  f.adopted_s = after(adopted, cut);
  const double back = restore >= 0 ? first_at(run.events, "adopted", restore) : -1;
  if (restore >= 0) {
    f.back_published_s = after(first_at(run.events, "published", restore), restore);
    f.back_adopted_s = after(back, restore);
  }
  if (adopted >= 0) f.busbw_switched = phase_busbw(run.calls, adopted, until);
  if (back >= 0) f.busbw_back = phase_busbw(run.calls, back, 1e300);
  // The ideals: weft's plans for the call size, simulated (demo_plan.h).
  DemoConfig one = cfg;
  one.bytes = cfg.call_bytes;
  WEFT_ASSIGN_OR_RETURN(TrialPlan intact, plan_trial(fabric, order, db_path, one, dir + "/plan-ideal-intact.json"));
  f.ideal_intact = intact.ideal_busbw_Bps;
  topo::Fabric failed = fabric;
  auto spine = failed.find_switch(fmt::format("s{}", fd.spine));
  auto host = failed.find_nic(fmt::format("h{}-1", fd.leaf));
  if (!spine || !host) return not_found(fmt::format("no spine s{} or host h{}-1 in the probed fabric", fd.spine, fd.leaf));
  auto link = failed.link_between(failed.switch_vertex(*spine), failed.switch_vertex(failed.nic_switch(*host)));
  if (!link) return not_found(fmt::format("the probed fabric has no link s{} - leaf of h{}-1", fd.spine, fd.leaf));
  failed.links[static_cast<size_t>(*link)].state = topo::LinkState::kDown;
  WEFT_ASSIGN_OR_RETURN(TrialPlan down, plan_trial(failed, order, db_path, one, dir + "/plan-ideal-failed.json"));
  f.ideal_failed = down.ideal_busbw_Bps;
  return f;
}

std::string live_summary(const DemoConfig& cfg, const LiveFigures& f) {
  auto secs = [](double s) { return s >= 0 ? fmt::format("{:.2f} s", s) : std::string("never"); };
  std::string out = fmt::format(
      "(c) after the cut: localised in {}, re-plan published in {}, adopted by every rank within {}; busbw until the "
      "restore {:.1f} Mbit/s = {:.2f} x the failed fabric's ideal ({:.1f})\n",
      secs(f.localised_s), secs(f.published_s), secs(f.adopted_s), mbit(f.busbw_switched),
      f.ideal_failed > 0 ? f.busbw_switched / f.ideal_failed : 0, mbit(f.ideal_failed));
  if (cfg.fail_during->restore_s > 0) {
    out += fmt::format("(c) after the restore: full plan published in {}, adopted within {}; busbw after {:.1f} Mbit/s = "
                       "{:.2f} x the intact ideal ({:.1f})\n",
                       secs(f.back_published_s), secs(f.back_adopted_s), mbit(f.busbw_back),
                       f.ideal_intact > 0 ? f.busbw_back / f.ideal_intact : 0, mbit(f.ideal_intact));
  }
  return out;
}

nlohmann::json live_json(const LiveFigures& f) {
  return {{"live",
           {{"localised_s", f.localised_s}, {"published_s", f.published_s}, {"adopted_s", f.adopted_s},
            {"back_published_s", f.back_published_s}, {"back_adopted_s", f.back_adopted_s},
            {"busbw_switched_mbit", mbit(f.busbw_switched)}, {"busbw_back_mbit", mbit(f.busbw_back)},
            {"ideal_failed_mbit", mbit(f.ideal_failed)}, {"ideal_intact_mbit", mbit(f.ideal_intact)}}}};
}

}  // namespace weft::cli::demo
