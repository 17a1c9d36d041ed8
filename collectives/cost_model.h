// kAuto's cost model (docs/collectives.md "Selection"): the predicted time
// of each AllReduce algorithm on a communicator, from its transports'
// constants (weft/collectives/tuning.h).
//
// An algorithm is a sequence of steps (Thakur, Rabenseifner & Gropp,
// "Optimization of Collective Communication Operations in MPICH", IJHPCA
// 2005, sections 3-4). In a step every rank sends and receives k messages
// of m bytes each and reduces r bytes; the step costs
//   k·α + k·m·β + r·γ   (β: beta_far for the bytes of a message past cache_bytes;
//                        α: alpha_shared where a host runs more ranks than CPUs)
// at the constants of the transport between hosts if any of the step's
// messages crosses hosts, else at those of the transport inside a host.
// For p ranks, p' = 2^floor(log2 p), n bytes (MPICH's fold for p != p':
// each of the first p - p' even ranks sends its vector to the next, which
// reduces it, and gets the result back at the end: routing::hd_layout):
//   butterfly  [fold] log2 p' steps of n, each reduced [unfold]
//   hd         [fold] log2 p' steps of n/2, n/4 .. n/p' reduced, the same
//              back unreduced [unfold]; in pieces of hd_piece_bytes, one
//              whole HD per piece
//   ring       p - 1 steps of n/p reduced, p - 1 unreduced
//   oneshot    one step of p - 1 messages of n each way, (p - 1)·n reduced
//   hybrid     h hosts of l ranks: a ring reduce-scatter inside each host
//              (l - 1 steps of n/l), hd between the hosts on n/l (the l
//              ranks of a host at once), a ring allgather inside each host
#pragma once

#include <vector>

#include "weft/collectives/communicator.h"
#include "weft/collectives/tuning.h"

namespace weft::coll::internal {

// The communicator as the model sees it.
struct ModelShape {
  std::vector<int> host_of;              // by rank: its host's index (the size is the rank count)
  const TransportCost* net = nullptr;    // a step with a message between hosts
  const TransportCost* local = nullptr;  // a step inside hosts
  bool shared_cpus = false;              // some host runs more ranks than it has CPUs
};

// Microseconds for one AllReduce of `bytes` by `a`: kButterfly,
// kHalvingDoubling, kRing, kOneShot, or kHybrid (which needs equal hosts of
// more than one rank: allreduce_hybrid.cc).
double allreduce_us(Algorithm a, const ModelShape& s, double bytes);

}  // namespace weft::coll::internal
