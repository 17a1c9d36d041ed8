// demo_rail.h: the rail fabric's trials, model -> plan -> kernel check -> (a), (b).
#include "demo_rail.h"

#include <chrono>
#include <cstdio>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "../cli_common.h"
#include "demo_plan.h"
#include "demo_report.h"
#include "demo_session.h"
#include "fib_path_table.h"
#include "weft/ranking/rank_order.h"
#include "weft/routing/hybrid_schedule.h"
#include "weft/routing/link_load.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/routing/simulator.h"
#include "weft/topology/builders.h"

namespace weft::cli::demo {
namespace {

// The fabric `weft topo gen rail` describes for these sizes: the names the
// script gives its namespaces (h<K>, NIC ports eth<g>p<k>, pl<k>-s<i>).
Result<topo::Fabric> rail_model(const DemoConfig& cfg) {
  topo::RailSpec spec;
  spec.hosts = cfg.rail_hosts;
  spec.nics_per_host = cfg.rails;
  spec.leaves_per_rail = DemoConfig::kRailLeaves;
  spec.spines = DemoConfig::kRailSpines;
  spec.planes = cfg.planes;
  spec.fabric_gbps = cfg.rate_mbit / 1000.0;
  spec.access_gbps = cfg.rate_mbit / 1000.0;
  return topo::build_rail(spec);
}

std::vector<std::string> rank_names(const topo::Fabric& f, const ranking::RankOrder& order) {
  std::vector<std::string> out;
  for (int nic : order.nics) {
    const topo::Nic& n = f.nics[static_cast<size_t>(nic)];
    out.push_back(f.hosts[static_cast<size_t>(n.host)].name + ":" + n.name);
  }
  return out;
}

struct RailPlan {
  routing::RoutePlan plan;
  routing::LoadReport check;
  double ideal_Bps = 0;
  int fabric_flows = 0;  // flows that cross a spine
};

// Source ports asked of the fabric per pair: with 2 spines a plane, the
// chance that all of them take one spine is 2^-15.
constexpr int kPortsPerPair = 16;

Result<RailPlan> plan_rail(const topo::Fabric& f, const ranking::RankOrder& order, const DemoConfig& cfg,
                           EmulatedFabric& fabric, const std::string& path) {
  routing::PlannerOptions opt;
  opt.protocol = "tcp";
  opt.tcp_dport = cfg.dport;
  WEFT_RETURN_IF_ERROR(routing::validate(opt, f, order));
  // Every pair of equal NIC ports of two hosts (hybrid's inter-host pairs
  // are among them), to the listen port of the destination's rank: dport +
  // its position among its host's ranks (docs/route-plan.md "Ports and
  // protocols", on listen ports).
  std::map<int, int> local;
  std::map<int, int> seen;
  for (int nic : order.nics) local[nic] = seen[f.nics[static_cast<size_t>(nic)].host]++;
  std::vector<FibQuery> queries;
  for (int a : order.nics) {
    for (int b : order.nics) {
      const topo::Nic &na = f.nics[static_cast<size_t>(a)], &nb = f.nics[static_cast<size_t>(b)];
      if (na.host != nb.host && na.name == nb.name) {
        queries.push_back({a, b, static_cast<uint16_t>(cfg.dport + local[b])});
      }
    }
  }
  WEFT_ASSIGN_OR_RETURN(auto table, make_fib_path_table(f, fabric, queries, kPortsPerPair));
  WEFT_ASSIGN_OR_RETURN(routing::Schedule sched, routing::build_fabric_schedule(f, order, routing::Collective::kAllreduceHybrid,
                                                                                cfg.bytes / 4, 4));
  WEFT_ASSIGN_OR_RETURN(routing::PlannedRoutes planned, routing::plan_routes(f, order, sched, *table, opt));
  RailPlan r;
  r.plan = std::move(planned.plan);
  // Judged by where the fabric forwards the planned ports (the table holds
  // the kernel's answer for exactly those 5-tuples).
  WEFT_ASSIGN_OR_RETURN(r.check, judge_plan(f, order, sched, r.plan, *table));
  for (const auto& fl : r.plan.flows) r.fabric_flows += fl.path.size() >= 3;
  WEFT_ASSIGN_OR_RETURN(auto sim_router, routing::make_table_router(f, order, r.plan, *table));
  WEFT_ASSIGN_OR_RETURN(routing::SimResult sim, routing::simulate(f, order, sched, *sim_router, {.hop_latency_s = 0}));
  r.ideal_Bps = routing::allreduce_busbw(cfg.bytes, order.size(), sim.seconds);
  WEFT_RETURN_IF_ERROR(routing::save_plan(r.plan, path));
  return r;
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

Status check_rail_flags(const std::vector<std::string>& given) {
  if (given.empty()) return ok_status();
  return invalid_argument(fmt::format(
      "--fabric rail does not take {} (a rail fabric is sized by --planes, --rails and --rail-hosts; it runs "
      "trials of hybrid AllReduce without probing, failures or allocation orders)",
      fmt::join(given, ", ")));
}

Status run_rail(const DemoConfig& cfg, const std::string& weft, const std::string& dir, bool own_dir) {
  const auto t0 = Clock::now();
  const int ranks = cfg.planes * cfg.rails * cfg.rail_hosts;
  fmt::print("weft demo: hybrid AllReduce of {} over TCP on an emulated rail-optimised fabric: {} planes x {} rails x "
             "{} hosts ({} leaves per rail, {} spines per plane), one rank per NIC port ({} ranks)\n"
             "  links {} Mbit/s (tbf), MTU {}, ECMP on the L4 5-tuple (hash policy 3), {} trial{}; work dir {}\n",
             format_bytes(static_cast<double>(cfg.bytes)), cfg.planes, cfg.rails, cfg.rail_hosts,
             DemoConfig::kRailLeaves, DemoConfig::kRailSpines, ranks, cfg.rate_mbit, cfg.mtu, cfg.trials,
             cfg.trials == 1 ? "" : "s", dir);
  std::fflush(stdout);
  WEFT_ASSIGN_OR_RETURN(auto session, DemoSession::start(cfg, weft, dir, own_dir));
  fmt::print("fabric up: namespaces {}*, {} rank workers running ({:.1f} s)\n", session->fabric().prefix(), ranks,
             since(t0));
  WEFT_ASSIGN_OR_RETURN(topo::Fabric f, rail_model(cfg));
  WEFT_ASSIGN_OR_RETURN(std::vector<int> alloc, ranking::allocation_from_names(f, session->host_names()));
  WEFT_ASSIGN_OR_RETURN(ranking::RankOrder order, ranking::rank(f, alloc, ranking::RankAlgo::kRail));
  const std::vector<std::string> names = rank_names(f, order);
  fmt::print("rank order (rail): {}\n", fmt::join(names, " "));
  std::vector<TrialResult> results;
  for (int t = 1; t <= cfg.trials; ++t) {
    const uint32_t seed = cfg.seed + static_cast<uint32_t>(t - 1);
    fmt::print("trial {}/{}: ECMP hash seed {}\n", t, cfg.trials, seed);
    if (t > 1) WEFT_RETURN_IF_ERROR(session->fabric().set_hash_seed(seed));
    const std::string path = fmt::format("{}/plan-{}.json", dir, t);
    WEFT_ASSIGN_OR_RETURN(RailPlan p, plan_rail(f, order, cfg, session->fabric(), path));
    fmt::print("  route: allreduce-hybrid, {} flows ({} cross a spine) planned on the fabric's forwarding tables, "
               "max load {} (lower bound {}) -> {}\n",
               p.plan.flows.size(), p.fabric_flows, p.check.max_load, p.check.max_lower_bound, path);
    std::fflush(stdout);
    WEFT_ASSIGN_OR_RETURN(AllreduceRun a, session->allreduce(names, "", fmt::format("a{}", t)));
    fmt::print("  (a) rail order, ephemeral ports: {:.2f} s, busbw {:.1f} Mbit/s, result verified\n", a.seconds,
               a.busbw_Bps * 8 / 1e6);
    std::fflush(stdout);
    WEFT_ASSIGN_OR_RETURN(AllreduceRun b, session->allreduce(names, path, fmt::format("b{}", t)));
    fmt::print("  (b) rail order + plan:          {:.2f} s, busbw {:.1f} Mbit/s, result verified\n", b.seconds,
               b.busbw_Bps * 8 / 1e6);
    std::fflush(stdout);
    results.push_back(trial_result(t, seed, a, b, p.ideal_Bps, p.check));
  }
  fmt::print("\nhybrid AllReduce of {} on {} ranks, busbw in Mbit/s ({} Mbit/s links); ideal = the plan simulated "
             "on the shaped links (inter-host steps; inside a host the ports talk over the host itself)\n{}",
             format_bytes(static_cast<double>(cfg.bytes)), ranks, cfg.rate_mbit, trial_header());
  for (const auto& r : results) fmt::print("{}", trial_row(r));
  fmt::print("{}", summary(results));
  if (!cfg.json.empty()) WEFT_RETURN_IF_ERROR(emit(cfg.json, results_json(cfg, results, since(t0))));
  const auto t_down = Clock::now();
  WEFT_RETURN_IF_ERROR(session->fabric().teardown());
  fmt::print("cleaned up: every process stopped, every namespace deleted ({:.1f} s); total {:.0f} s\n", since(t_down),
             since(t0));
  return ok_status();
}

}  // namespace weft::cli::demo
