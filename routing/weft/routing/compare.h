// What weft is worth on one fabric and allocation: the simulator run four
// ways (the comparison `weft sim` prints and plots).
//   (a) default   the allocation's own order, ECMP with random ephemeral ports
//   (b) leafsets  leaf-set ranking (ACCL), still default ECMP
//   (c) weft      weft's ranking and planned source ports (weft route), the
//                 planned ports looked up in the fabric's hash model, so the
//                 paths are where the ports really go, and the plan's
//                 rounds (docs/route-plan.md "Rounds") run one after another
//   (d) ideal     an ideal non-blocking switch (access links only)
// (a) and (b) are random (ports, hash seeds): they are averaged over
// `trials` seeds (mean time), each trial a different fabric seed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "weft/routing/simulator.h"

namespace weft::routing {

enum class SimCollective { kHd, kRing, kHybrid, kNcclRing };
std::string_view sim_collective_name(SimCollective c);
// allreduce-hd|-ring|-hybrid, nccl-ring
std::optional<SimCollective> parse_sim_collective(std::string_view s);

struct CompareOptions {
  SimCollective collective = SimCollective::kHd;
  uint64_t bytes = 64ull << 20;  // per rank
  SimOptions sim;
  double shm_gbps = 1600;        // hybrid: intra-host bandwidth per rank (NVLink-class)
  std::string hash = "crc32";    // the fabric's ECMP model
  uint32_t seed = 1;
  int trials = 3;
  int ports_per_pair = 64;
  NcclRingShape nccl;            // nccl-ring: channels and QPs per connection
};

struct CaseResult {
  std::string name;
  double seconds = 0;
  double algbw = 0;  // bytes/s
  double busbw = 0;  // bytes/s
  int max_load = 0;  // worst step (first trial); per round where the plan has rounds
  int lower_bound = 0;  // (c): the checker's bound over the plan's steps (per round)
  int rounds = 1;       // (c): the most rounds of a step
  int steps_in_rounds = 0;     // (c): steps in more than one round
  int single_round_bound = 0;  // (c): the bound without rounds
  int steps_above_bound = 0;   // (c): steps not at their bound (link_load.h at_bound)
  std::vector<double> utilisation;  // per directed link (first trial)
};

struct Comparison {
  int endpoints = 0;
  std::vector<CaseResult> cases;  // a, b, c, d
};

Result<Comparison> compare_routings(const topo::Fabric& f, const std::vector<int>& allocation,
                                    const CompareOptions& opt);

}  // namespace weft::routing
