// Routers that replay a route plan, so the link-load checker judges it.
//
//   plan   follows each flow's planned switch path (what the planner claims);
//   table  looks each flow's planned 5-tuple (protocol, sport, dport) up in a
//          path table — with a model table, an independent recomputation of
//          where the fabric's hashes send the planned ports; with a measured
//          table, where the probes saw them go.
// Both check the plan against the rank order first: every flow's ranks must
// be the plan's, and its hosts (and NICs, where named) where the order runs
// those ranks.
#pragma once

#include <memory>

#include "weft/ranking/rank_order.h"
#include "weft/routing/path_table.h"
#include "weft/routing/plan.h"
#include "weft/routing/router.h"

namespace weft::routing {

Result<std::unique_ptr<Router>> make_plan_router(const topo::Fabric& f, const ranking::RankOrder& order,
                                                 const RoutePlan& plan);
Result<std::unique_ptr<Router>> make_table_router(const topo::Fabric& f, const ranking::RankOrder& order,
                                                  const RoutePlan& plan, PathTable& table);

}  // namespace weft::routing
