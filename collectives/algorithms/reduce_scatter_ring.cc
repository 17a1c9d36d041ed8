// Ring ReduceScatter: block r of the reduced vector ends on rank r
// (ring_phases with shift 0), segmented and pipelined. kData holds the
// whole P x count input (the communicator copies the caller's send buffer
// there, since the reduction happens in place).
#include "algorithms/algorithms.h"
#include "algorithms/ring_phases.h"

namespace weft::coll::internal {
namespace {

class ReduceScatterRing final : public Plan {
 public:
  explicit ReduceScatterRing(const Shape& s)
      : bytes_(s.count * s.esize * static_cast<size_t>(s.size)),
        chunks_(block_chunks(s.size, 0, s.count, s.esize, s.segment ? s.segment : kDefaultSegment)),
        peers_(ring_peers(s.rank, s.size)) {}
  size_t scratch_bytes() const override { return bytes_; }
  std::vector<int> peers() const override { return peers_; }
  Status run(Context& ctx) const override {
    ctx.step("ring-rs", 1);
    return ring_reduce_scatter(ctx, chunks_, 0);
  }

 private:
  size_t bytes_;
  Chunks chunks_;
  std::vector<int> peers_;
};

}  // namespace

std::unique_ptr<Plan> plan_reduce_scatter_ring(const Shape& s) { return std::make_unique<ReduceScatterRing>(s); }

}  // namespace weft::coll::internal
