// A flow-level fabric simulator: how long a collective takes on a fabric,
// step by step, when flows share links max-min fairly.
//
// Every step's flows start together; their rates are the max-min fair
// allocation over the directed links they cross (max_min.h), recomputed
// when flows finish and the survivors' rates can change (fluid_step.h; an
// event-driven fluid model, as in flow-level
// simulators such as SimGrid's; no packets, queues or congestion-control
// dynamics). A step ends when its last flow finishes, plus the per-hop
// latency of its longest path; ring steps repeat their flows `repeat`
// times, each repetition carrying 1/repeat of the bytes. Steps run one
// after another (a collective's steps depend on each other), and so do the
// rounds of a step (Flow::round, docs/route-plan.md "Rounds"): each round's
// flows share links max-min fairly among themselves, and the step's time is
// the sum of its rounds' times (each with its own per-hop latency).
//
//   auto r = simulate(fabric, order, schedule, *router, {});
//   double busbw = allreduce_busbw(bytes_per_rank, order.size(), r->seconds);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/ranking/rank_order.h"
#include "weft/routing/router.h"
#include "weft/routing/schedule.h"

namespace weft::routing {

struct SimOptions {
  double hop_latency_s = 1e-6;  // per link crossed (NIC, switch and wire)
};

struct SimStep {
  int step = 0;
  std::string phase;
  int repeat = 1;
  double seconds = 0;  // all repetitions
  int rounds = 1;      // time slices (max Flow::round + 1)
  int max_load = 0;    // flows of one round on the busiest directed link
  int events = 0;      // distinct flow finish times
  int solves = 0;      // max-min allocations computed (fluid_step.h: at most events)
};

struct SimResult {
  double seconds = 0;
  std::vector<SimStep> steps;
  std::vector<double> link_bytes;  // per directed link, over the whole collective
  // Bytes over (capacity x duration), per directed link.
  std::vector<double> utilisation() const;
  std::vector<double> capacity_Bps;  // per directed link
};

Result<SimResult> simulate(const topo::Fabric& f, const ranking::RankOrder& order, const Schedule& s, Router& router,
                           const SimOptions& opt = {});

// nccl-tests' definitions (PERFORMANCE.md): algbw = bytes / time; for
// allreduce busbw = algbw * 2 (n - 1) / n, the rate each rank's link must
// sustain, comparable with the link speed.
double algbw(uint64_t bytes, double seconds);
double allreduce_busbw(uint64_t bytes, int ranks, double seconds);

}  // namespace weft::routing
