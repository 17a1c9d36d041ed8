// What `weft demo` prints and writes: per-link utilisation measured on the
// fabric's interfaces, mapped onto the probed fabric's links; the trial
// table and its summary; the SVG; a JSON record of everything.
#pragma once

#include <string>
#include <vector>

#include "demo_config.h"
#include "demo_session.h"
#include "emulated_fabric.h"
#include "weft/routing/link_load.h"
#include "weft/topology/fabric.h"

namespace weft::cli::demo {

// Per directed link of `f` (the probed fabric: hosts h<leaf>-<k>, spines
// s<N>): bytes the interfaces counted over the run / (rate x seconds).
Result<std::vector<double>> measured_utilisation(const topo::Fabric& f, const FabricCounters& bytes, double seconds,
                                                 int rate_mbit);

struct TrialResult {
  int trial = 0;
  uint32_t hash_seed = 0;
  uint32_t hash_seeds = 1;    // (a) is a mean over seeds hash_seed .. hash_seed + hash_seeds - 1
  bool failed_link = false;   // the run after --fail
  bool ideal_intact = false;  // failed_link, and the ideal is the intact fabric's (demo_sim.cc: the plan missed a bound)
  double busbw_a = 0, busbw_b = 0, ideal = 0;  // bytes/s
  double seconds_a = 0, seconds_b = 0;
  int max_load_b = 0, lower_bound_b = 0;       // the checker over (b)'s plan, per round
  int rounds_b = 1;                            // most rounds of a step in (b)'s plan
  int steps_in_rounds_b = 0;                   // steps of (b)'s plan in more than one round
  int single_round_bound_b = 0;                // the bound (b) would have without rounds
  int steps_above_bound_b = 0;                 // steps of (b) not at their bound (routing/link_load.h at_bound)
  std::vector<double> util_a, util_b;          // per directed link of `fabric`
  topo::Fabric fabric;                         // the probed fabric of this run
};

// A row from runs (a) and (b), the ideal (bytes/s) and the checker's report
// over (b)'s plan; the caller adds the utilisation and the fabric.
TrialResult trial_result(int trial, uint32_t seed, const AllreduceRun& a, const AllreduceRun& b, double ideal,
                         const routing::LoadReport& check);

// "  1   seed 1   (a) 41.2  (b) 94.0  ideal 100.0 Mbit/s   (b)/(a) 2.28  (b)/ideal 0.94 ..."
std::string trial_row(const TrialResult& t);
std::string trial_header();
// Mean, min and max of (b)/(a) and (b)/ideal over the trials without a failed link.
std::string summary(const std::vector<TrialResult>& trials);
// One row per spine-leaf link and direction, (a) beside (b), then host links.
std::string utilisation_table(const TrialResult& t);

std::string results_json(const DemoConfig& cfg, const std::vector<TrialResult>& trials, double total_seconds);

}  // namespace weft::cli::demo
