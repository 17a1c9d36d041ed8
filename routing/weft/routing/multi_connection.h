// Several TCP connections per directed pair (`weft route
// --qps-per-connection Q`): the collective library's TCP transport opens
// connections_per_peer connections to each peer and stripes large messages
// over them (collectives/tcp/tcp_transport.h), so each is a flow of its own
// that ECMP hashes on its own 5-tuple. Every flow a -> b of a schedule
// becomes Q flows, conn = 0..Q-1 (qp = 0), carrying its bytes in equal
// shares; the planner then gives each its own source port on its own path,
// dealing the pair's ports out route by route as for nccl-ring's QPs
// (planner.h, 2). All Q connections of a pair carry data at once, so a
// step's load counts all of them.
#pragma once

#include "weft/common/status.h"
#include "weft/routing/plan.h"
#include "weft/routing/schedule.h"

namespace weft::routing {

// connections_per_peer of the TCP transport takes at most this many.
inline constexpr int kMaxConnectionsPerPair = 64;

// OK for q in 1..kMaxConnectionsPerPair, else an error naming q.
Status validate_connections_per_pair(int q);

// `s` with every flow split into `q` connections (q = 1: `s` unchanged).
// Fails for q outside 1..kMaxConnectionsPerPair, naming q, and for a
// schedule whose flows already carry connections (nccl-ring).
Result<Schedule> with_connections(const Schedule& s, int q);

// The connections per directed pair a plan of allreduce-hd or -ring names:
// its largest `conn` + 1 (1 for a plan without connections). What `weft
// check` splits the schedule by to replay the plan.
int plan_connections(const RoutePlan& plan);

}  // namespace weft::routing
