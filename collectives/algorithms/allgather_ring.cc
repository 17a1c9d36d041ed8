// Ring AllGather: rank r's block starts at r in the output (the communicator
// puts it there) and travels P-1 hops, segmented and pipelined
// (ring_phases with shift 0).
#include "algorithms/algorithms.h"
#include "algorithms/ring_phases.h"

namespace weft::coll::internal {
namespace {

class AllgatherRing final : public Plan {
 public:
  explicit AllgatherRing(const Shape& s)
      : chunks_(block_chunks(s.size, 0, s.count, s.esize, s.segment ? s.segment : kDefaultSegment)),
        peers_(ring_peers(s.rank, s.size)) {}
  size_t scratch_bytes() const override { return 0; }
  std::vector<int> peers() const override { return peers_; }
  Status run(Context& ctx) const override {
    ctx.step("ring-ag", 1);
    return ring_allgather(ctx, chunks_, 0);
  }

 private:
  Chunks chunks_;
  std::vector<int> peers_;
};

}  // namespace

std::unique_ptr<Plan> plan_allgather_ring(const Shape& s) { return std::make_unique<AllgatherRing>(s); }

}  // namespace weft::coll::internal
