// weft demo: the whole pipeline on an emulated fabric, measured.
//
// A spine-leaf fabric of network namespaces with tbf-shaped links
// (scripts/netns-fabric.sh, embedded), `weft agent` on every host, a TCP SYN
// probe campaign of the data port, the inferred fabric, weft's rank order, a
// route plan from the probe database, and HD AllReduce over TCP run twice per
// trial: (a) the allocation's order with ephemeral ports, (b) weft's order
// with the plan's source ports. Each trial draws a new ECMP hash seed (and
// re-probes the HD pairs, as a job launch would). Prints busbw, ratios, the
// ideal and the link utilisation read from the switches' interface counters;
// writes an SVG. Everything it starts is stopped and every namespace deleted,
// also on Ctrl-C, on failure, and (by a reaper process) when weft is killed.
// Without root it runs the simulator on the same fabric instead.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>

#include "cli_common.h"
#include "demo/demo_live.h"
#include "demo/demo_plan.h"
#include "demo/demo_rail.h"
#include "demo/demo_report.h"
#include "demo/demo_session.h"
#include "demo/demo_sim.h"
#include "demo/demo_timeline.h"
#include "demo/demo_worker.h"
#include "fabric_svg.h"

namespace weft::cli {
namespace {

using demo::Clock;
using demo::DemoConfig;
using demo::InterruptGuard;
using demo::TrialResult;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Status interrupted_check() {
  if (!InterruptGuard::interrupted()) return ok_status();
  return aborted(fmt::format("interrupted by signal {}", InterruptGuard::signal_number()));
}

// Probe -> (infer) -> plan -> run (a) and (b): one row of the table.
struct Trial {
  demo::DemoSession& s;
  const DemoConfig& cfg;
  std::string dir;

  Result<TrialResult> run(int t, uint32_t seed, bool failed, const topo::Fabric& fabric, const demo::Orders& orders) {
    const std::string plan_path = fmt::format("{}/plan-{}.json", dir, failed ? "fail" : std::to_string(t));
    WEFT_ASSIGN_OR_RETURN(demo::TrialPlan plan, demo::plan_trial(fabric, orders.weft, s.db_path(), cfg, plan_path));
    int in_rounds = 0, single_round_bound = 0, above = 0;
    for (const auto& st : plan.check.steps) {
      in_rounds += st.rounds > 1;
      above += st.max_load > st.lower_bound;
      single_round_bound = std::max(single_round_bound, st.single_round_bound);
    }
    fmt::print("  route: {} flows planned on the probed ports, max load {} (lower bound {}){} -> {}\n",
               plan.plan.flows.size(), plan.check.max_load, plan.check.max_lower_bound,
               in_rounds == 0 ? "" : fmt::format(" per round, {} steps in {} rounds (one round: load {})", in_rounds,
                                                 plan.check.max_rounds, single_round_bound),
               plan_path);
    if (failed || in_rounds > 0) {
      // Per step: the checker's max load / the bound (max over leaves and
      // directions of ceil(flows / usable links)), per round where the step
      // runs in rounds (docs/route-plan.md "Rounds").
      std::string steps;
      for (const auto& st : plan.check.steps) {
        steps += fmt::format(" {}/{}{}", st.max_load, st.lower_bound,
                             st.rounds > 1 ? fmt::format(" ({} rounds)", st.rounds) : "");
      }
      fmt::print("  per step, max load / lower bound:{}\n", steps);
    }
    std::fflush(stdout);
    WEFT_RETURN_IF_ERROR(interrupted_check());
    const auto tag = failed ? std::string("fail") : std::to_string(t);
    WEFT_ASSIGN_OR_RETURN(demo::AllreduceRun a, s.allreduce(demo::host_names(fabric, orders.input), "", "a" + tag));
    fmt::print("  (a) input order, ephemeral ports: {:.2f} s, busbw {:.1f} Mbit/s, result verified\n", a.seconds,
               a.busbw_Bps * 8 / 1e6);
    std::fflush(stdout);
    WEFT_RETURN_IF_ERROR(interrupted_check());
    WEFT_ASSIGN_OR_RETURN(demo::AllreduceRun b, s.allreduce(demo::host_names(fabric, orders.weft), plan_path, "b" + tag));
    fmt::print("  (b) weft order + plan:            {:.2f} s, busbw {:.1f} Mbit/s, result verified\n", b.seconds,
               b.busbw_Bps * 8 / 1e6);
    TrialResult r = demo::trial_result(t, seed, a, b, plan.ideal_busbw_Bps, plan.check);
    r.failed_link = failed;
    WEFT_ASSIGN_OR_RETURN(r.util_a, demo::measured_utilisation(fabric, a.bytes, a.seconds, cfg.rate_mbit));
    WEFT_ASSIGN_OR_RETURN(r.util_b, demo::measured_utilisation(fabric, b.bytes, b.seconds, cfg.rate_mbit));
    r.fabric = fabric;
    return r;
  }
};

// A full campaign, the fabric it found, and the two rank orders of the
// allocation on it. The hosts file lists hosts leaf by leaf, so the inferred
// leaves l<M> (numbered by their first host) are the fabric's leaves M.
Result<std::pair<topo::Fabric, demo::Orders>> bring_up(demo::DemoSession& s, const DemoConfig& cfg,
                                                       const std::vector<std::string>& allocation) {
  WEFT_ASSIGN_OR_RETURN(demo::ProbeRun p, s.probe(s.host_names(), false));
  WEFT_ASSIGN_OR_RETURN(std::string found, demo::describe_inference(s.db_path(), p.campaign));
  fmt::print("probe: campaign {}, TCP SYN to port {}, {} flows ({} pairs x {} ports) in {:.1f} s; inferred {}\n",
             p.campaign, cfg.dport, p.flows, cfg.hosts() * (cfg.hosts() - 1), cfg.probe_ports, p.seconds, found);
  WEFT_ASSIGN_OR_RETURN(topo::Fabric f, demo::probed_fabric(s.db_path(), p.campaign, cfg.rate_mbit));
  WEFT_ASSIGN_OR_RETURN(demo::Orders o, demo::rank_orders(f, allocation));
  return std::make_pair(std::move(f), std::move(o));
}

// --fail-during: plan once, then (a) and (b) as timelines of back-to-back
// calls while the link fails and comes back (demo_timeline.h).
Status run_timeline(demo::DemoSession& s, const DemoConfig& cfg, const std::string& dir, const topo::Fabric& fabric,
                    const demo::Orders& orders) {
  const std::string plan_path = fmt::format("{}/plan-timeline.json", dir);
  WEFT_ASSIGN_OR_RETURN(demo::TrialPlan plan, demo::plan_trial(fabric, orders.weft, s.db_path(), cfg, plan_path));
  const auto& f = *cfg.fail_during;
  fmt::print("  route: {} flows planned on the probed ports, max load {} (lower bound {}) -> {}\n",
             plan.plan.flows.size(), plan.check.max_load, plan.check.max_lower_bound, plan_path);
  fmt::print("timeline: HD AllReduce of {} back to back for {:g} s; spine {} - leaf {} cut at {:g} s{}{}\n",
             format_bytes(static_cast<double>(cfg.call_bytes)), cfg.timeline_s, f.spine, f.leaf, f.cut_s,
             cfg.converge_ms > 0 ? fmt::format(", withdrawn by the routing {} ms later", cfg.converge_ms)
                                 : " (never withdrawn: a gray failure)",
             f.restore_s > 0 ? fmt::format(", restored at {:g} s", f.restore_s) : "");
  std::vector<demo::TimelineRun> runs;
  const std::vector<std::pair<std::string, std::pair<const ranking::RankOrder*, std::string>>> plans = {
      {"(a) input order, ephemeral ports (ECMP)", {&orders.input, ""}},
      {"(b) weft order + plan, no re-planning", {&orders.weft, plan_path}}};
  for (const auto& [name, what] : plans) {
    WEFT_RETURN_IF_ERROR(interrupted_check());
    fmt::print("  {}: running...\n", name);
    std::fflush(stdout);
    demo::FaultSchedule faults(s.fabric(), cfg);
    WEFT_ASSIGN_OR_RETURN(auto calls, s.series(demo::host_names(fabric, *what.first), what.second,
                                               name.substr(0, 3), [&](double t) { return faults.at(t); }));
    WEFT_RETURN_IF_ERROR(faults.heal());
    runs.push_back({name, std::move(calls), faults.events()});
    fmt::print("  {}: {} calls, every result verified\n", name, runs.back().calls.size());
  }
  WEFT_RETURN_IF_ERROR(interrupted_check());
  fmt::print("  (c) weft order + plan, re-planned live: running...\n");
  std::fflush(stdout);
  WEFT_ASSIGN_OR_RETURN(demo::TimelineRun live,
                        demo::run_live(s, cfg, dir, demo::host_names(fabric, orders.weft), plan_path));
  fmt::print("  {}: {} calls, every result verified\n", live.name, live.calls.size());
  WEFT_ASSIGN_OR_RETURN(demo::LiveFigures figures,
                        demo::live_figures(cfg, live, fabric, orders.weft, s.db_path(), dir));
  runs.push_back(std::move(live));
  fmt::print("\n{}", demo::timeline_table(cfg, runs));
  fmt::print("{}", demo::live_summary(cfg, figures));
  if (!cfg.svg.empty()) {
    WEFT_RETURN_IF_ERROR(emit(cfg.svg, demo::timeline_svg(cfg, runs)));
    fmt::print("wrote {} (busbw per call over time)\n", cfg.svg);
  }
  if (!cfg.json.empty()) WEFT_RETURN_IF_ERROR(emit(cfg.json, demo::timeline_json(cfg, runs, demo::live_json(figures))));
  return ok_status();
}

Status run_emulated(const DemoConfig& cfg, const std::string& dir, bool own_dir) {
  const auto t0 = Clock::now();
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return io_error("readlink /proc/self/exe", errno);
  const std::string weft(exe, static_cast<size_t>(n));
  if (cfg.fabric == "rail") return demo::run_rail(cfg, weft, dir, own_dir);
  const std::string runs = cfg.fail_during ? fmt::format("a {:g} s timeline with a link failure", cfg.timeline_s)
                                            : fmt::format("{} trial{}", cfg.trials, cfg.trials == 1 ? "" : "s");
  fmt::print("weft demo: HD AllReduce of {} over TCP on an emulated {}x{}x{} spine-leaf fabric\n"
             "  links {} Mbit/s (tbf), MTU {}, ECMP on the L4 5-tuple (hash policy 3), {}; work dir {}\n",
             format_bytes(static_cast<double>(cfg.fail_during ? cfg.call_bytes : cfg.bytes)), cfg.spines, cfg.leaves,
             cfg.hosts_per_leaf, cfg.rate_mbit, cfg.mtu, runs, dir);
  std::fflush(stdout);
  WEFT_ASSIGN_OR_RETURN(auto session, demo::DemoSession::start(cfg, weft, dir, own_dir));
  fmt::print("fabric up: namespaces {}*, {} agents running ({:.1f} s)\n", session->fabric().prefix(), cfg.hosts(),
             since(t0));
  std::fflush(stdout);
  const auto allocation = demo::allocation_order(session->host_names(), cfg);
  WEFT_RETURN_IF_ERROR(interrupted_check());
  WEFT_ASSIGN_OR_RETURN(auto up, bring_up(*session, cfg, allocation));
  auto& [fabric, orders] = up;
  fmt::print("allocation ({}): {}\nweft rank order:      {}\n", cfg.order,
             fmt::join(demo::host_names(fabric, orders.input), " "), fmt::join(demo::host_names(fabric, orders.weft), " "));
  std::fflush(stdout);

  if (cfg.fail_during) {
    WEFT_RETURN_IF_ERROR(run_timeline(*session, cfg, dir, fabric, orders));
    const auto t_down = Clock::now();
    WEFT_RETURN_IF_ERROR(session->fabric().teardown());
    fmt::print("cleaned up: every process stopped, every namespace deleted ({:.1f} s); total {:.0f} s\n",
               since(t_down), since(t0));
    return ok_status();
  }
  Trial trial{*session, cfg, dir};
  std::vector<TrialResult> results;
  for (int t = 1; t <= cfg.trials; ++t) {
    WEFT_RETURN_IF_ERROR(interrupted_check());
    const uint32_t seed = cfg.seed + static_cast<uint32_t>(t - 1);
    fmt::print("trial {}/{}: ECMP hash seed {}\n", t, cfg.trials, seed);
    const auto t_trial = Clock::now();
    if (t > 1) {
      // A new hash is a new fabric as far as ECMP goes: re-probe the pairs
      // weft's order needs (a targeted campaign, as at job launch).
      WEFT_RETURN_IF_ERROR(session->fabric().set_hash_seed(seed));
      WEFT_ASSIGN_OR_RETURN(demo::ProbeRun p, session->probe(demo::host_names(fabric, orders.weft), true));
      fmt::print("  probe: targeted campaign {} (HD pairs until every spine has a port per flow of the host): {} flows in {:.1f} s\n",
                 p.campaign, p.flows, p.seconds);
    }
    WEFT_ASSIGN_OR_RETURN(TrialResult r, trial.run(t, seed, false, fabric, orders));
    results.push_back(std::move(r));
    fmt::print("  trial {} took {:.1f} s\n", t, since(t_trial));
  }
  int failed_link = -1;
  if (cfg.fail) {
    WEFT_RETURN_IF_ERROR(interrupted_check());
    const auto [sp, lf] = *cfg.fail;
    fmt::print("failing link spine {} - leaf {}; re-probing, re-planning\n", sp, lf);
    WEFT_RETURN_IF_ERROR(session->fabric().fail_link(sp, lf));
    WEFT_ASSIGN_OR_RETURN(auto down, bring_up(*session, cfg, allocation));
    auto found = fabric.find_switch(fmt::format("s{}", sp));
    auto leaf = fabric.find_switch(fmt::format("l{}", lf));
    if (found && leaf) failed_link = fabric.link_between(fabric.switch_vertex(*found), fabric.switch_vertex(*leaf)).value_or(-1);
    WEFT_ASSIGN_OR_RETURN(TrialResult r, trial.run(cfg.trials + 1, cfg.seed + static_cast<uint32_t>(cfg.trials - 1),
                                                   true, down.first, down.second));
    results.push_back(std::move(r));
  }

  fmt::print("\nHD AllReduce of {} on {} hosts, busbw in Mbit/s (comparable with the {} Mbit/s links); ideal = weft's "
             "plan simulated on the shaped links; (b) load = max flows per link at once / lower bound, by the checker\n{}",
             format_bytes(static_cast<double>(cfg.bytes)), cfg.hosts(), cfg.rate_mbit, demo::trial_header());
  for (const auto& r : results) fmt::print("{}", demo::trial_row(r));
  fmt::print("{}", demo::summary(results));
  fmt::print("\nlink utilisation in trial 1 (interface byte counters / (link rate x AllReduce time)):\n{}",
             demo::utilisation_table(results.front()));
  if (cfg.fail) fmt::print("\nlink utilisation after the failure:\n{}", demo::utilisation_table(results.back()));
  if (!cfg.svg.empty()) {
    std::vector<SvgPanel> panels = {{"(a) input order, ephemeral ports", results.front().util_a, {}},
                                    {"(b) weft order + planned ports", results.front().util_b, {}}};
    if (cfg.fail) panels.push_back({"(b) after the link failed", results.back().util_b, {failed_link}});
    WEFT_RETURN_IF_ERROR(emit(cfg.svg, fabric_svg(results.front().fabric, panels)));
    fmt::print("wrote {} (link utilisation of (a) and (b))\n", cfg.svg);
  }
  if (!cfg.json.empty()) WEFT_RETURN_IF_ERROR(emit(cfg.json, demo::results_json(cfg, results, since(t0))));
  const auto t_down = Clock::now();
  WEFT_RETURN_IF_ERROR(session->fabric().teardown());
  fmt::print("cleaned up: every process stopped, every namespace deleted ({:.1f} s); total {:.0f} s\n", since(t_down),
             since(t0));
  return ok_status();
}

int run_demo(const DemoConfig& cfg) {
  if (auto st = cfg.validate(); !st) return fail(st);
  // The SVG and JSON are written at the end of a run of minutes: a path
  // that cannot be written is refused now. A rail run writes no SVG.
  if (cfg.fabric != "rail") {
    if (auto st = check_output_path("--svg", cfg.svg); !st) return fail(st);
  }
  if (auto st = check_output_path("--json", cfg.json); !st) return fail(st);
  const std::string why = demo::emulation_unavailable_reason();
  if (cfg.fabric == "rail" && !why.empty()) {
    return fail(invalid_argument(fmt::format("--fabric rail runs on the emulated fabric only: {}", why)));
  }
  if (cfg.fail_during && (cfg.simulate || !why.empty())) {
    return fail(invalid_argument(fmt::format("--fail-during runs on the emulated fabric only{}",
                                             why.empty() ? " (drop --simulate)" : ": " + why)));
  }
  if (cfg.simulate || !why.empty()) {
    if (!cfg.simulate) fmt::print("weft demo: cannot emulate the fabric: {}.\nRunning the simulator on the same fabric instead.\n\n", why);
    auto st = demo::run_simulated(cfg);
    return st ? 0 : fail(st);
  }
  // One worker per rank, each holding the data and a scratch buffer: a size
  // the machine cannot hold is refused before anything is built.
  if (const auto available = demo::mem_available_bytes()) {
    const int workers = cfg.fabric == "rail" ? cfg.planes * cfg.rails * cfg.rail_hosts : cfg.hosts();
    const auto st = cfg.fail_during ? demo::check_workers_memory("--call-size", workers, cfg.call_bytes, *available)
                                    : demo::check_workers_memory("--size", workers, cfg.bytes, *available);
    if (!st) return fail(st);
  }
  InterruptGuard guard;  // Ctrl-C ends the current wait; RAII cleans up
  std::string dir = cfg.work_dir;
  const bool own = dir.empty();
  if (own) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "weft-demo-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) return fail(io_error("mkdtemp", errno));
    dir = tmpl;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail(io_error(fmt::format("cannot create --work-dir {}", dir), ec.value()));
  }
  Status st = run_emulated(cfg, dir, own);  // the session (fabric, processes) is gone when this returns
  if (own) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  if (!st) {
    if (InterruptGuard::interrupted()) {
      std::fflush(stdout);
      fmt::print(stderr, "weft demo: interrupted by signal {}: every process stopped, every namespace deleted\n",
                 InterruptGuard::signal_number());
      return 128 + InterruptGuard::signal_number();
    }
    return fail(st.with_context("weft demo (cleaned up)"));
  }
  return 0;
}

bool parse_link(const std::string& s, std::pair<int, int>& out) {
  const auto colon = s.find(':');
  if (colon == std::string::npos) return false;
  try {
    size_t a = 0, b = 0;
    out.first = std::stoi(s.substr(0, colon), &a);
    out.second = std::stoi(s.substr(colon + 1), &b);
    return a == colon && b == s.size() - colon - 1;
  } catch (const std::exception&) {
    return false;
  }
}

// Seconds as "10", "10s" or "2.5s"; false if it is not one.
bool parse_seconds(const std::string& s, double& out) {
  std::string t = s;
  if (!t.empty() && t.back() == 's') t.pop_back();
  try {
    size_t used = 0;
    out = std::stod(t, &used);
    return used == t.size() && !t.empty();
  } catch (const std::exception&) {
    return false;
  }
}

// SPINE:LEAF@CUT[:RESTORE], e.g. 2:3@10s or 2:3@10s:25s; RESTORE defaults to
// twice CUT (so a 30 s timeline shows 10 s before, 10 s cut, 10 s after).
bool parse_fail_during(const std::string& s, DemoConfig::FaultDuring& out) {
  const auto at = s.find('@');
  if (at == std::string::npos) return false;
  std::pair<int, int> link;
  if (!parse_link(s.substr(0, at), link)) return false;
  const std::string times = s.substr(at + 1);
  const auto colon = times.find(':');
  out.spine = link.first;
  out.leaf = link.second;
  if (!parse_seconds(times.substr(0, colon), out.cut_s)) return false;
  if (colon == std::string::npos) {
    out.restore_s = 2 * out.cut_s;
    return true;
  }
  return parse_seconds(times.substr(colon + 1), out.restore_s);
}

}  // namespace

void register_demo(CLI::App& app, Registry& reg) {
  static DemoConfig cfg;
  static std::string size = "64MiB", fail_link, sockbuf = "0", fail_during, call_size = "4MiB", timeline = "30s";
  auto* cmd = app.add_subcommand("demo", "weft end to end on an emulated fabric: probe, rank, route, AllReduce, measured");
  cmd->footer(
      "Builds a spine-leaf fabric of network namespaces (tbf-shaped links, ECMP on the L4\n"
      "5-tuple), starts `weft agent` on every host, probes which spine every TCP flow to the\n"
      "data port takes, ranks the hosts, plans source ports, and runs HD AllReduce over TCP\n"
      "twice per trial: (a) the allocation's order with ephemeral ports, (b) weft's order with\n"
      "the planned ports. Prints busbw of both, their ratio, the ideal, per-link utilisation\n"
      "from the interface counters, and writes an SVG. Needs root; without it the simulator\n"
      "runs on the same fabric. Ctrl-C stops it cleanly. Walk-through: docs/demo.md.\n"
      "  weft demo                        # 4x4x4, 200 Mbit/s, 64 MiB, 5 trials\n"
      "  weft demo --fail 2:3             # then fail spine 2 - leaf 3, re-probe, re-plan, rerun\n"
      "  weft demo --fail-during 2:3@10s  # calls back to back for 30 s; spine 2 - leaf 3 fails at\n"
      "                                   # 10 s (the routing withdraws it 0.5 s later), back at 20 s\n"
      "  weft demo --size 16MiB --trials 3 --json out.json\n"
      "  weft demo --fabric rail          # 2 planes x 2 rails x 4 hosts, 16 ranks: hybrid AllReduce,\n"
      "                                   # ECMP vs the allreduce-hybrid plan (docs/demo.md)");
  cmd->add_option("--fabric", cfg.fabric,
                  "spine-leaf, or rail: hybrid AllReduce on a rail-optimised multi-plane fabric, one rank per NIC port "
                  "(--planes x --rails x --rail-hosts; 2 leaves per rail, 2 spines per plane), (a) ECMP vs (b) the "
                  "allreduce-hybrid plan")
      ->capture_default_str();
  cmd->add_option("--planes", cfg.planes, "--fabric rail: planes (they share no switch)")->capture_default_str();
  cmd->add_option("--rails", cfg.rails, "--fabric rail: NICs per host, NIC g on rail g")->capture_default_str();
  cmd->add_option("--rail-hosts", cfg.rail_hosts, "--fabric rail: hosts")->capture_default_str();
  cmd->add_option("--spines", cfg.spines, "Spines")->capture_default_str();
  cmd->add_option("--leaves", cfg.leaves, "Leaves")->capture_default_str();
  cmd->add_option("--hosts", cfg.hosts_per_leaf, "Hosts per leaf")->capture_default_str();
  cmd->add_option("--rate-mbit", cfg.rate_mbit, "Link rate (tbf), Mbit/s")->capture_default_str();
  cmd->add_option("--mtu", cfg.mtu, "MTU of every link")->capture_default_str();
  cmd->add_option("--size", size, "AllReduce size (f32 elements x 4 bytes)")->capture_default_str();
  cmd->add_option("--trials", cfg.trials, "Trials, each with a new ECMP hash seed")->capture_default_str();
  cmd->add_option("--seed", cfg.seed, "First hash seed; also shuffles the allocation")->capture_default_str();
  cmd->add_option("--order", cfg.order, "Allocation order for (a): shuffled, interleaved, sorted")->capture_default_str();
  cmd->add_option("--fail", fail_link, "SPINE:LEAF: afterwards fail this link, re-probe, re-plan and rerun");
  cmd->add_option("--fail-during", fail_during,
                  "SPINE:LEAF@CUT[:RESTORE]: instead of trials, run (a) and (b) as timelines of back-to-back calls "
                  "while this link fails at CUT seconds and comes back at RESTORE (default 2 x CUT)");
  cmd->add_option("--timeline", timeline, "With --fail-during: how long each timeline runs")->capture_default_str();
  cmd->add_option("--call-size", call_size, "With --fail-during: the size of each call")->capture_default_str();
  cmd->add_option("--converge-ms", cfg.converge_ms,
                  "With --fail-during: the routing withdraws the failed link this long after it stops carrying "
                  "packets (0 = never: a gray failure that ECMP keeps hashing flows onto)")
      ->capture_default_str();
  cmd->add_option("--probe-ports", cfg.probe_ports, "Source ports per pair in the bring-up campaign")->capture_default_str();
  cmd->add_option("--dport", cfg.dport, "TCP data port (probed; planned flows' destination)")->capture_default_str();
  cmd->add_option("--store-port", cfg.store_port, "TCP store port on rank 0's host")->capture_default_str();
  cmd->add_option("--timeout", cfg.timeout_s, "Seconds per AllReduce run")->capture_default_str();
  cmd->add_option("--socket-buffer", sockbuf, "TCP socket buffers (0 = 5 ms of the link rate: bounds how far a rank "
                                              "ahead in HD floods its next partner)")->capture_default_str();
  cmd->add_option("--svg", cfg.svg, "SVG of the fabric with link utilisation ('' = none)")->capture_default_str();
  cmd->add_option("--json", cfg.json, "Write the results as JSON here");
  cmd->add_option("--work-dir", cfg.work_dir, "Keep logs, fabric.db and plans here (default: a temporary dir, removed)");
  cmd->add_option("--prefix", cfg.prefix, "Namespace prefix (default wfdemo<pid>-)");
  cmd->add_flag("--simulate", cfg.simulate, "Run the simulator even where the fabric could be emulated");
  // The rank worker the demo starts on every host (demo_worker.h); hidden.
  static demo::WorkerArgs worker;
  auto* wcmd = cmd->add_subcommand("worker", "")->group("");
  wcmd->add_option("--dir", worker.dir)->required();
  wcmd->add_option("--host", worker.host)->required();
  wcmd->add_option("--name", worker.name);
  wcmd->add_option("--ip", worker.ip)->required();
  wcmd->add_option("--max-bytes", worker.max_bytes)->required();
  wcmd->callback([&reg] { reg.run = [] { return demo::run_worker(worker); }; });
  cmd->callback([&reg, wcmd, cmd] {
    if (wcmd->parsed()) return;
    reg.run = [cmd] {
      if (cfg.fabric == "rail") {
        std::vector<std::string> given;
        for (const char* flag : {"--spines", "--leaves", "--hosts", "--order", "--fail", "--fail-during", "--timeline",
                                 "--call-size", "--converge-ms", "--probe-ports", "--svg", "--simulate"}) {
          if (cmd->count(flag) > 0) given.push_back(flag);
        }
        if (auto st = demo::check_rail_flags(given); !st) return fail(st);
      } else {
        for (const char* flag : {"--planes", "--rails", "--rail-hosts"}) {
          if (cmd->count(flag) > 0) return fail(invalid_argument(fmt::format("{} needs --fabric rail", flag)));
        }
        // Else the demo runs its trials and the value is silently unused.
        for (const char* flag : {"--timeline", "--call-size", "--converge-ms"}) {
          if (cmd->count(flag) > 0 && fail_during.empty()) {
            return fail(invalid_argument(fmt::format(
                "{} needs --fail-during (it shapes the timeline of a link that fails mid-run)", flag)));
          }
        }
      }
      auto bytes = parse_size(size);
      if (!bytes) return fail(invalid_argument(fmt::format("bad --size '{}' (e.g. 64MiB)", size)));
      cfg.bytes = *bytes;
      auto sb = parse_size(sockbuf);
      if (!sb) return fail(invalid_argument(fmt::format("bad --socket-buffer '{}'", sockbuf)));
      cfg.socket_buffer = *sb;
      if (!fail_link.empty()) {
        std::pair<int, int> l;
        if (!parse_link(fail_link, l)) return fail(invalid_argument(fmt::format("--fail '{}' is not SPINE:LEAF", fail_link)));
        cfg.fail = l;
      }
      if (!fail_during.empty()) {
        DemoConfig::FaultDuring f;
        if (!parse_fail_during(fail_during, f)) {
          return fail(invalid_argument(
              fmt::format("--fail-during '{}' is not SPINE:LEAF@CUT[:RESTORE] (e.g. 2:3@10s)", fail_during)));
        }
        cfg.fail_during = f;
        if (!parse_seconds(timeline, cfg.timeline_s)) {
          return fail(invalid_argument(fmt::format("bad --timeline '{}' (e.g. 30s)", timeline)));
        }
        auto cb = parse_size(call_size);
        if (!cb) return fail(invalid_argument(fmt::format("bad --call-size '{}' (e.g. 4MiB)", call_size)));
        cfg.call_bytes = *cb;
      }
      return run_demo(cfg);
    };
  });
}

}  // namespace weft::cli
