// demo_plan.h: inferred fabric -> rank -> route -> check -> simulate.
#include "demo_plan.h"

#include "../path_source.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "weft/db/database.h"
#include "weft/db/stores.h"
#include "weft/probe/db_path_table.h"
#include "weft/probe/inferred_topology.h"
#include "weft/routing/auto_order.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/routing/simulator.h"

namespace weft::cli::demo {

namespace {
Result<db::Database> open_ro(const std::string& path) {
  db::OpenOptions ro;
  ro.read_only = true;
  return db::Database::open(path, ro);
}
}  // namespace

Result<topo::Fabric> probed_fabric(const std::string& db_path, int64_t campaign, int rate_mbit) {
  WEFT_ASSIGN_OR_RETURN(db::Database db, open_ro(db_path));
  probe::InferredTopologyOptions o;
  o.campaign = campaign;
  o.fabric_gbps = rate_mbit / 1000.0;
  o.access_gbps = rate_mbit / 1000.0;
  o.name = fmt::format("probed-{}", campaign);
  return probe::inferred_topology(db, o);
}

Result<std::string> describe_inference(const std::string& db_path, int64_t campaign) {
  WEFT_ASSIGN_OR_RETURN(db::Database db, open_ro(db_path));
  WEFT_ASSIGN_OR_RETURN(db::InferredFabric inf, db::load_inference(db, campaign));
  int leaves = 0;
  for (const auto& [host, leaf] : inf.host_leaf) leaves = std::max(leaves, leaf);
  std::string dead;
  for (const auto& l : inf.links) {
    if (l.dead) dead += fmt::format("{}spine {} - leaf {}", dead.empty() ? "" : ", ", l.spine, l.leaf);
  }
  return fmt::format("{} leaves x {} spines, {}", leaves, inf.spines.size(),
                     dead.empty() ? "every spine-leaf link carried flows" : "dead: " + dead + " (no flow crossed it)");
}

std::vector<std::string> allocation_order(std::vector<std::string> hosts, const DemoConfig& cfg) {
  if (cfg.order == "shuffled") {
    // What `weft sim` calls (a): a scheduler's node list with no regard for leaves.
    std::shuffle(hosts.begin(), hosts.end(), std::mt19937(cfg.seed));
  } else if (cfg.order == "interleaved") {
    // Round-robin over leaves (hosts arrive leaf by leaf): h1-1 h2-1 ... h1-2 ...
    std::vector<std::string> out;
    for (int k = 0; k < cfg.hosts_per_leaf; ++k) {
      for (int l = 0; l < cfg.leaves; ++l) out.push_back(hosts[static_cast<size_t>(l * cfg.hosts_per_leaf + k)]);
    }
    hosts = std::move(out);
  }
  return hosts;
}

Result<Orders> rank_orders(const topo::Fabric& f, const std::vector<std::string>& allocation) {
  WEFT_ASSIGN_OR_RETURN(std::vector<int> alloc, ranking::allocation_from_names(f, allocation));
  Orders o;
  o.input = ranking::rank_naive(alloc);
  // The order weft rank writes for the collective the demo runs (HD).
  WEFT_ASSIGN_OR_RETURN(auto chosen, routing::auto_order(f, alloc, routing::Collective::kAllreduceHd));
  o.weft = std::move(chosen.order);
  return o;
}

std::vector<std::string> host_names(const topo::Fabric& f, const ranking::RankOrder& order) {
  std::vector<std::string> out;
  for (int nic : order.nics) out.push_back(f.hosts[static_cast<size_t>(f.nics[static_cast<size_t>(nic)].host)].name);
  return out;
}

Result<routing::LoadReport> judge_plan(const topo::Fabric& f, const ranking::RankOrder& order,
                                       routing::Schedule& sched, const routing::RoutePlan& plan,
                                       routing::PathTable& table) {
  // Load, bound and time per round, as the collective library runs it.
  WEFT_RETURN_IF_ERROR(routing::apply_plan_rounds(plan, sched));
  // Judge the plan by where the table sends its ports, not by its own claim
  // (as `weft route` does before it writes a plan).
  WEFT_ASSIGN_OR_RETURN(auto check_router, routing::make_table_router(f, order, plan, table));
  WEFT_ASSIGN_OR_RETURN(routing::LoadReport check, routing::check_link_load(f, order, sched, *check_router));
  for (size_t i = 0; i < check.steps.size(); ++i) {
    if (check.steps[i].max_load != plan.steps[i].max_load) {
      return internal_error(fmt::format("step {}: the plan claims load {} but its ports give {}", i,
                                        plan.steps[i].max_load, check.steps[i].max_load));
    }
  }
  return check;
}

Result<TrialPlan> plan_trial(const topo::Fabric& f, const ranking::RankOrder& order, const std::string& db_path,
                             const DemoConfig& cfg, const std::string& plan_path) {
  routing::PlannerOptions opt;
  opt.protocol = "tcp";
  opt.tcp_dport = cfg.dport;
  opt.ports_per_pair = kDbPortsPerPair;
  WEFT_RETURN_IF_ERROR(routing::validate(opt, f, order));
  WEFT_ASSIGN_OR_RETURN(auto table, probe::open_db_path_table(f, db_path));
  const uint64_t count = cfg.bytes / 4;
  WEFT_ASSIGN_OR_RETURN(routing::Schedule sched,
                        routing::build_schedule(routing::Collective::kAllreduceHd, order.size(), count, 4));
  WEFT_ASSIGN_OR_RETURN(routing::PlannedRoutes planned, routing::plan_routes(f, order, sched, *table, opt));
  TrialPlan t;
  t.plan = std::move(planned.plan);
  WEFT_ASSIGN_OR_RETURN(t.check, judge_plan(f, order, sched, t.plan, *table));
  WEFT_ASSIGN_OR_RETURN(auto sim_router, routing::make_table_router(f, order, t.plan, *table));
  WEFT_ASSIGN_OR_RETURN(routing::SimResult sim, routing::simulate(f, order, sched, *sim_router, {.hop_latency_s = 0}));
  t.ideal_seconds = sim.seconds;
  t.ideal_busbw_Bps = routing::allreduce_busbw(cfg.bytes, order.size(), sim.seconds);
  WEFT_RETURN_IF_ERROR(routing::save_plan(t.plan, plan_path));
  return t;
}

}  // namespace weft::cli::demo
