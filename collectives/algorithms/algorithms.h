// The algorithms (internal). Each is planned once for a (group, count,
// element size) — peers, block ranges, scratch size — and the plan is cached
// by the communicator; run() only moves and reduces. One file per algorithm.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "context.h"
#include "weft/routing/gates.h"

namespace weft::coll::internal {

class Plan {
 public:
  virtual ~Plan() = default;
  virtual size_t scratch_bytes() const = 0;
  virtual Status run(Context& ctx) const = 0;
  // The group indices this rank sends to or receives from when it runs the
  // plan: the pairs the communicator connects before the plan first runs
  // (communicator.h, "Connections"). Ascending, without this rank. Every
  // algorithm's peers are symmetric: j lists i exactly when i lists j.
  virtual std::vector<int> peers() const = 0;
};

// `ranks` ascending without duplicates and without `me` (peers.cc).
std::vector<int> peer_set(std::vector<int> ranks, int me);
// A ring's neighbours of `rank` among `size`: rank - 1 and rank + 1 mod
// size (none below 2 ranks).
std::vector<int> ring_peers(int rank, int size);

struct Shape {
  int size = 1;          // group size
  int rank = 0;          // group index of this rank
  size_t count = 0;      // elements (allreduce: whole vector; rs: per rank; ag: per rank)
  size_t esize = 1;      // bytes per element
  size_t segment = 0;    // pipelining unit in bytes (0 = algorithm default)
  size_t offset = 0;     // first element of the vector in kData (hybrid's inter-host leg)
  int root = 0;          // broadcast
  std::vector<int> host_of;  // group index -> host index (hybrid, hierarchical); filled when planning
  const std::vector<int>* group = nullptr;  // group index -> rank (the communicator's, while planning)
  // The route plan's gates (allreduce HD, ring or hybrid — the plan's — on
  // the whole communicator in the plan's rank order only; nullptr
  // otherwise): ranks = group indices.
  const std::vector<routing::Gate>* gates = nullptr;
  size_t piece = 0;  // HD: run on consecutive pieces of at most this many bytes (0 = whole; pieces.h)
};

// allreduce_halving_doubling.cc: Rabenseifner with MPICH's fold, exactly the
// flows of routing::build_schedule(kAllreduceHd); with Shape::gates, the
// route plan's rounds in time (hd_gates.cc); with Shape::piece and no
// gates, one HD per consecutive piece (pieces.h).
std::unique_ptr<Plan> plan_allreduce_hd(const Shape& s);
// allreduce_ring.cc: routing::build_schedule(kAllreduceRing), segmented.
std::unique_ptr<Plan> plan_allreduce_ring(const Shape& s);
// allreduce_butterfly.cc: recursive doubling on whole vectors.
std::unique_ptr<Plan> plan_allreduce_butterfly(const Shape& s);
// allreduce_oneshot.cc: every rank sends its vector to every peer and
// reduces all of them in rank order (one round).
std::unique_ptr<Plan> plan_allreduce_oneshot(const Shape& s);
// allreduce_hybrid.cc: shm reduce-scatter, inter-host HD, shm allgather.
// Needs host_of with the same number of ranks on every host.
std::unique_ptr<Plan> plan_allreduce_hybrid(const Shape& s);
// reduce_scatter_ring.cc, allgather_ring.cc: count = elements per rank.
std::unique_ptr<Plan> plan_reduce_scatter_ring(const Shape& s);
std::unique_ptr<Plan> plan_allgather_ring(const Shape& s);
// allgather_hierarchical.cc: pipelined hierarchical AllGather (HCCL's).
std::unique_ptr<Plan> plan_allgather_hierarchical(const Shape& s);
// broadcast_binomial.cc
std::unique_ptr<Plan> plan_broadcast_binomial(const Shape& s);

// Hosts in order of first appearance; each host's members ascending. Empty
// unless every host has the same number of ranks.
std::vector<std::vector<int>> equal_hosts(const std::vector<int>& host_of);

}  // namespace weft::coll::internal
