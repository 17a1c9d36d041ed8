// The fabric part of hybrid allreduce (hybrid_schedule.h) for hosts given
// as rank lists: what both the route planner (build_hybrid_schedule) and
// the collective library (which checks a hybrid route plan against its own
// hosts, collectives/hybrid_plan.cc) take for hybrid's inter-host flows.
#pragma once

#include <cstdint>
#include <vector>

#include "weft/common/status.h"
#include "weft/routing/schedule.h"

namespace weft::routing {

// hosts[h][k]: the k-th rank of host h, every host the same number G of
// ranks. HD allreduce among the hosts on ceil(count / G) elements, run by
// the k-th ranks of all hosts side by side for every k: one flow per local
// index per host pair, steps numbered as build_schedule(kAllreduceHd,
// hosts.size()) numbers them, flows of a step by local index, then as HD
// lists them; the schedule's collective is kAllreduceHybrid. Fails when
// hosts differ in size or there is no rank.
Result<Schedule> hybrid_inter_host(const std::vector<std::vector<int>>& hosts, uint64_t count, uint32_t elem_size = 4);

}  // namespace weft::routing
