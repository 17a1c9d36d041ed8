// Route plans for the collective tests made as `weft route` makes them, on
// a generated 2-tier Clos by routing::plan_routes: hybrid (`--collective
// allreduce-hybrid`: the inter-host flows of routing::build_hybrid_schedule,
// collective "allreduce-hybrid") and HD with several TCP connections per
// pair (`--qps-per-connection Q`: routing::with_connections).
#pragma once

#include <string>

#include "epoch_files.h"

#include "weft/ranking/rank_order.h"
#include "weft/routing/ecmp.h"
#include "weft/routing/hybrid_schedule.h"
#include "weft/routing/multi_connection.h"
#include "weft/routing/path_table.h"
#include "weft/routing/planner.h"
#include "weft/topology/builders.h"

namespace weft::coll::testing {

// `hosts` hosts of `per_host` NICs (one rank each, ranks host by host),
// `hosts_per_leaf` hosts on each leaf, `spines` spines. With one spine every
// step's flows between two leaves share the leaf's one uplink: they run in
// rounds, and the gates tie the legs of different local ranks together.
inline routing::RoutePlan hybrid_route_plan(int hosts, int per_host, int hosts_per_leaf, int spines,
                                            const std::string& protocol = "udp") {
  const topo::Fabric f = topo::build_clos2({.spines = spines,
                                            .leaves = hosts / hosts_per_leaf,
                                            .hosts_per_leaf = hosts_per_leaf,
                                            .nics_per_host = per_host})
                             .value();
  const ranking::RankOrder order = ranking::rank_naive(ranking::allocation_all(f));
  const routing::HybridSchedule h = routing::build_hybrid_schedule(f, order, 1 << 20).value();
  auto table = routing::make_model_path_table(f, routing::make_hash("crc32", 1).value());
  routing::PlannerOptions opt;
  opt.protocol = protocol;
  routing::RoutePlan plan = routing::plan_routes(f, order, h.inter_host, *table, opt).value().plan;
  plan.collective = "allreduce-hybrid";
  return plan;
}

// HD on `ranks` ranks (one per host, 2 leaves, 4 spines) over tcp with `q`
// connections per directed pair, conn = 0..q-1, each on a planned port.
inline routing::RoutePlan hd_connections_plan(int ranks, int q) {
  const topo::Fabric f = topo::build_clos2({.spines = 4, .leaves = 2, .hosts_per_leaf = ranks / 2}).value();
  const ranking::RankOrder order = ranking::rank_naive(ranking::allocation_all(f));
  const routing::Schedule hd = routing::build_schedule(routing::Collective::kAllreduceHd, ranks, 1 << 20).value();
  auto table = routing::make_model_path_table(f, routing::make_hash("crc32", 1).value());
  routing::PlannerOptions opt;
  opt.protocol = "tcp";
  opt.rounds = false;  // as `weft route` plans Q > 1
  return routing::plan_routes(f, order, routing::with_connections(hd, q).value(), *table, opt).value().plan;
}

// `plan` over TCP on ports free on this host: every flow its own source
// port, every rank its own listen port (all ranks share 127.0.0.1, where
// the planner's ports — distinct per source host, one listen port per
// host's first rank — would collide).
inline routing::RoutePlan on_free_tcp_ports(routing::RoutePlan plan) {
  const std::vector<uint16_t> ports = free_ports(plan.flows.size() + static_cast<size_t>(plan.ranks));
  if (ports.size() < plan.flows.size() + static_cast<size_t>(plan.ranks)) return plan;
  for (size_t i = 0; i < plan.flows.size(); ++i) {
    routing::PlanFlow& f = plan.flows[i];
    f.protocol = "tcp";
    f.sport = ports[i];
    f.dport = ports[plan.flows.size() + static_cast<size_t>(f.dst_rank)];
  }
  return plan;
}

}  // namespace weft::coll::testing
