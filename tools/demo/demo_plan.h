// The planning half of `weft demo`, in process and on measured data only:
// the fabric the probe campaign inferred (probe/inferred_topology.h), weft's
// rank order for the allocation, and a route plan whose ports come from the
// probe database (the same code as `weft topo infer`, `weft rank` and
// `weft route --paths fabric.db`), checked and simulated before it runs.
#pragma once

#include <string>
#include <vector>

#include "demo_config.h"
#include "weft/ranking/rank_order.h"
#include "weft/routing/link_load.h"
#include "weft/routing/path_table.h"
#include "weft/routing/plan.h"
#include "weft/routing/schedule.h"
#include "weft/topology/fabric.h"

namespace weft::cli::demo {

// The fabric campaign `campaign` of the database found, links at rate_mbit.
Result<topo::Fabric> probed_fabric(const std::string& db_path, int64_t campaign, int rate_mbit);

// One line about what the inference found: leaves, spines, dead links.
Result<std::string> describe_inference(const std::string& db_path, int64_t campaign);

// The allocation in the order a scheduler hands it over (DemoConfig::order).
std::vector<std::string> allocation_order(std::vector<std::string> hosts, const DemoConfig& cfg);

struct Orders {
  ranking::RankOrder input;  // (a): the allocation's order
  ranking::RankOrder weft;   // (b): weft rank (auto: contiguous leaf sets on a Clos)
};
Result<Orders> rank_orders(const topo::Fabric& f, const std::vector<std::string>& allocation);
std::vector<std::string> host_names(const topo::Fabric& f, const ranking::RankOrder& order);

struct TrialPlan {
  routing::RoutePlan plan;
  routing::LoadReport check;  // the checker over the paths the plan's ports take in the DB, per round
  double ideal_busbw_Bps = 0;  // the plan simulated on the shaped links, rounds one after another
  double ideal_seconds = 0;
};

// Gives `sched` the plan's rounds and checks the plan on where `table`
// sends its ports (probed or the fabric's own forwarding); fails when that
// load differs from what the plan claims.
Result<routing::LoadReport> judge_plan(const topo::Fabric& f, const ranking::RankOrder& order,
                                       routing::Schedule& sched, const routing::RoutePlan& plan,
                                       routing::PathTable& table);

// Plans HD AllReduce over TCP for `order` with the newest campaign's ports
// (in rounds where a failed link leaves a leaf too few uplinks), checks it
// (every step at its lower bound), simulates it and writes it to `plan_path`.
Result<TrialPlan> plan_trial(const topo::Fabric& f, const ranking::RankOrder& order, const std::string& db_path,
                             const DemoConfig& cfg, const std::string& plan_path);

}  // namespace weft::cli::demo
