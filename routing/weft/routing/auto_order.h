// `auto` for one collective: the rank order weft rank writes and weft sim's
// case (c) runs when the user asks for none.
//
// The fabric's own candidate (ranking::resolve_auto: hdrm on a BiGraph, rail
// on rail and multi-plane fabrics, clos otherwise) is not always the best one
// for the collective. The rail order puts a host's NICs on consecutive ranks,
// which is what the hybrid AllReduce's rail-aligned steps want, but
// halving-doubling's largest messages (fold, distance 1) then run between
// two NICs of one host, on two rails, over a spine; leaf sets keep them under
// one rail leaf (docs/ranking.md). So where the fabric's candidate is not
// clos, both are judged by the link-load checker's bound for the collective
// (step_lower_bound, link_load.h: what no routing can beat), each step's
// bound weighted by the bytes of its largest flow and summed over the steps:
// the busiest link's bytes, a time the planned routes are held to. The lower
// sum wins; on a tie the fabric's candidate stays (rail keeps a host's ranks
// contiguous, which torchrun and MPICH files need). So auto is never worse
// than leaf sets on the checker. Rings (allreduce-ring, nccl-ring) take the
// ring order on every fabric, unweighed.
#pragma once

#include <string>
#include <vector>

#include "weft/ranking/rank_order.h"
#include "weft/routing/schedule.h"

namespace weft::routing {

struct AutoCandidate {
  ranking::RankAlgo algo = ranking::RankAlgo::kClos;
  // Sum over steps of bound x the step's largest flow, in vectors (the
  // bytes per rank): size-independent for a given order.
  double bound_vectors = 0;
  int max_bound = 0;  // the largest step bound
};

struct AutoOrder {
  ranking::RankAlgo algo = ranking::RankAlgo::kClos;  // never kAuto
  ranking::RankOrder order;
  std::vector<AutoCandidate> weighed;  // the candidates judged (empty when there was one)
  std::string why;                     // one line for weft rank ("" where the fabric's candidate is clos
                                       // and the collective is not a ring)
};

Result<AutoOrder> auto_order(const topo::Fabric& f, const std::vector<int>& allocation, Collective c,
                             const NcclRingShape& shape = {});

}  // namespace weft::routing
