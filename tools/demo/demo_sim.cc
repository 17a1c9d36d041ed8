// `weft demo` without root (or with --simulate): the same fabric, allocation
// and collective in the flow-level simulator (routing/compare.h), reported
// with the emulated demo's table, link utilisation, SVG and JSON.
#include "demo_sim.h"

#include <chrono>

#include <fmt/format.h>

#include "../cli_common.h"
#include "../fabric_svg.h"
#include "demo_plan.h"
#include "demo_report.h"
#include "weft/routing/compare.h"
#include "weft/topology/builders.h"

namespace weft::cli::demo {

Status run_simulated(const DemoConfig& cfg) {
  const auto t0 = std::chrono::steady_clock::now();
  const double gbps = cfg.rate_mbit / 1000.0;
  WEFT_ASSIGN_OR_RETURN(topo::Fabric f, topo::build_clos2({.spines = cfg.spines, .leaves = cfg.leaves,
                                                           .hosts_per_leaf = cfg.hosts_per_leaf,
                                                           .fabric_gbps = gbps, .access_gbps = gbps}));
  std::vector<std::string> names;
  for (const auto& h : f.hosts) names.push_back(h.name);
  WEFT_ASSIGN_OR_RETURN(std::vector<int> alloc, ranking::allocation_from_names(f, allocation_order(names, cfg)));
  routing::CompareOptions opt;
  opt.collective = routing::SimCollective::kHd;
  opt.bytes = cfg.bytes;
  opt.sim.hop_latency_s = 0;
  opt.hash = "linux-l4";  // the emulated fabric's ECMP: L4 hash policy 3
  opt.seed = cfg.seed;
  opt.trials = cfg.trials;

  auto compare = [&](const topo::Fabric& fab, int trial, bool failed) -> Result<TrialResult> {
    WEFT_ASSIGN_OR_RETURN(routing::Comparison c, routing::compare_routings(fab, alloc, opt));
    const auto& a = c.cases[0];
    const auto& weft = c.cases[2];
    const auto& ideal = c.cases[3];
    TrialResult t;
    t.trial = trial;
    t.hash_seed = cfg.seed;
    t.hash_seeds = static_cast<uint32_t>(cfg.trials);  // compare_routings: seeds seed .. seed + trials - 1
    t.failed_link = failed;
    t.busbw_a = a.busbw;
    t.busbw_b = weft.busbw;
    t.seconds_a = a.seconds;
    t.seconds_b = weft.seconds;
    // The ideal of a fabric with a failed link is what the best plan can
    // do on the links left, which is (c) when it meets every step's bound;
    // when it does not, the crossbar's (which ignores the failure) is the
    // one bound at hand: (c)/ideal then says how far (c) fell short.
    t.ideal_intact = failed && weft.steps_above_bound > 0;
    t.ideal = failed && !t.ideal_intact ? weft.busbw : ideal.busbw;
    t.max_load_b = weft.max_load;
    t.lower_bound_b = weft.lower_bound;  // the checker's, per round where the plan has rounds
    t.rounds_b = weft.rounds;
    t.steps_in_rounds_b = weft.steps_in_rounds;
    t.single_round_bound_b = weft.single_round_bound;
    t.steps_above_bound_b = weft.steps_above_bound;
    t.util_a = a.utilisation;
    t.util_b = weft.utilisation;
    t.fabric = fab;
    fmt::print("{:<26} {:>10.1f} Mbit/s busbw, {:>7.2f} s, max load {}\n", a.name, a.busbw * 8 / 1e6, a.seconds, a.max_load);
    fmt::print("{:<26} {:>10.1f} Mbit/s busbw, {:>7.2f} s, max load {}\n", c.cases[1].name, c.cases[1].busbw * 8 / 1e6,
               c.cases[1].seconds, c.cases[1].max_load);
    fmt::print("{:<26} {:>10.1f} Mbit/s busbw, {:>7.2f} s, max load {}{}\n", weft.name, weft.busbw * 8 / 1e6, weft.seconds,
               weft.max_load, weft.rounds > 1 ? fmt::format(" per round ({} steps in {} rounds)", weft.steps_in_rounds, weft.rounds) : "");
    fmt::print("{:<26} {:>10.1f} Mbit/s busbw, {:>7.2f} s\n", ideal.name, ideal.busbw * 8 / 1e6, ideal.seconds);
    return t;
  };

  fmt::print("simulated {}x{}x{} Clos, links {} Mbit/s, HD AllReduce of {} per rank, (a) and (b) averaged over {} "
             "hash seed{}:\n",
             cfg.spines, cfg.leaves, cfg.hosts_per_leaf, cfg.rate_mbit, format_bytes(static_cast<double>(cfg.bytes)),
             cfg.trials, cfg.trials == 1 ? "" : "s");
  std::vector<TrialResult> results;
  WEFT_ASSIGN_OR_RETURN(TrialResult t1, compare(f, 1, false));
  results.push_back(std::move(t1));
  int failed_link = -1;
  if (cfg.fail) {
    topo::Fabric g = f;
    auto s = g.find_switch(fmt::format("s{}", cfg.fail->first));
    auto l = g.find_switch(fmt::format("l{}", cfg.fail->second));
    auto link = s && l ? g.link_between(g.switch_vertex(*s), g.switch_vertex(*l)) : std::nullopt;
    if (!link) return not_found(fmt::format("no link s{} - l{}", cfg.fail->first, cfg.fail->second));
    g.links[static_cast<size_t>(*link)].state = topo::LinkState::kDown;
    WEFT_RETURN_IF_ERROR(g.finalize());
    failed_link = *link;
    fmt::print("\nwith link s{} - l{} failed:\n", cfg.fail->first, cfg.fail->second);
    WEFT_ASSIGN_OR_RETURN(TrialResult t2, compare(g, 1, true));
    results.push_back(std::move(t2));
  }
  fmt::print("\n{}", trial_header());
  for (const auto& t : results) fmt::print("{}", trial_row(t));
  // The table has the emulated demo's columns, whose (b) is weft's: the
  // case list above names it (c) (routing/compare.h), and its (b) is leaf
  // sets on ECMP. Say which row is which, and that (a) is a mean.
  fmt::print("busbw in Mbit/s (comparable with the link rate); (a) = (a) above, the mean over {} hash seed{}; "
             "(b) = (c) above, weft order + planned ports (simulated)\n\n",
             cfg.trials, cfg.trials == 1 ? "" : "s");
  fmt::print("simulated link utilisation:\n{}", utilisation_table(results.front()));
  if (!cfg.svg.empty()) {
    std::vector<SvgPanel> panels = {{"(a) input order, ECMP (simulated)", results.front().util_a, {}},
                                    {"(b) weft order + plan (simulated)", results.front().util_b, {}}};
    if (failed_link >= 0) panels.push_back({"(b) with a failed link (simulated)", results.back().util_b, {failed_link}});
    WEFT_RETURN_IF_ERROR(emit(cfg.svg, fabric_svg(f, panels)));
    fmt::print("wrote {}\n", cfg.svg);
  }
  if (!cfg.json.empty()) WEFT_RETURN_IF_ERROR(emit(cfg.json, results_json(cfg, results, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count())));
  return ok_status();
}

}  // namespace weft::cli::demo
