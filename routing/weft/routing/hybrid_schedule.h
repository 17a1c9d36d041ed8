// Hybrid allreduce (ACCL's hybrid ring + HD: Dong et al., IEEE Micro 2021): the
// fabric part of it.
//
//   1. reduce-scatter inside each host over shared memory / NVLink: each of a
//      host's G ranks ends with 1/G of the vector reduced over the host;
//   2. the k-th ranks of all H hosts run HD allreduce on that 1/G (G HD
//      allreduces side by side, one per local index, each on its own NIC);
//   3. allgather inside each host.
// Only step 2 crosses the fabric; build_hybrid_schedule() returns it as a
// Schedule over the job's global ranks (step s of every group runs at once),
// so the checker, the planner and the simulator treat it like any other.
// Steps 1 and 2 move (G - 1) / G of the vector per rank each, inside hosts.
#pragma once

#include <cstdint>

#include "weft/ranking/rank_order.h"
#include "weft/routing/hybrid_inter_host.h"
#include "weft/routing/schedule.h"

namespace weft::routing {

struct HybridSchedule {
  Schedule inter_host;
  int ranks_per_host = 1;   // G
  int hosts = 0;            // H
  uint64_t intra_bytes = 0; // bytes each rank moves inside its host, per intra-host phase
};

// Fails when hosts carry different numbers of ranks (the groups would not line up).
// inter_host is hybrid_inter_host() of the hosts in order of their first
// rank, each host's ranks in rank order.
// Its collective is Collective::kAllreduceHybrid.
Result<HybridSchedule> build_hybrid_schedule(const topo::Fabric& f, const ranking::RankOrder& order, uint64_t count,
                                             uint32_t elem_size = 4);

// The schedule of any collective over `order` on `f`: build_hybrid_schedule's
// inter_host for allreduce-hybrid, build_schedule for the others.
Result<Schedule> build_fabric_schedule(const topo::Fabric& f, const ranking::RankOrder& order, Collective c,
                                       uint64_t count, uint32_t elem_size = 4, const NcclRingShape& shape = {});

}  // namespace weft::routing
