// The algorithms (internal). Each is planned once for a (group, count,
// element size) — peers, block ranges, scratch size — and the plan is cached
// by the communicator; run() only moves and reduces. One file per algorithm.
#pragma once

#include <cstddef>
#include <memory>

#include "context.h"

namespace weft::coll::internal {

class Plan {
 public:
  virtual ~Plan() = default;
  virtual size_t scratch_bytes() const = 0;
  virtual Status run(Context& ctx) const = 0;
};

struct Shape {
  int size = 1;          // group size
  int rank = 0;          // group index of this rank
  size_t count = 0;      // elements (allreduce: whole vector; rs: per rank; ag: per rank)
  size_t esize = 1;      // bytes per element
  size_t segment = 0;    // pipelining unit in bytes (0 = algorithm default)
};

// allreduce_halving_doubling.cc: Rabenseifner with MPICH's fold, exactly the
// flows of routing::build_schedule(kAllreduceHd).
std::unique_ptr<Plan> plan_allreduce_hd(const Shape& s);
// allreduce_ring.cc: routing::build_schedule(kAllreduceRing), segmented.
std::unique_ptr<Plan> plan_allreduce_ring(const Shape& s);
// allreduce_butterfly.cc: recursive doubling on whole vectors (seed 000).
std::unique_ptr<Plan> plan_allreduce_butterfly(const Shape& s);

}  // namespace weft::coll::internal
