// Ring AllReduce: reduce-scatter then allgather around r -> r+1 (Patarasuk &
// Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
// workstations", JPDC 2009; NCCL's ring), chunked as routing's
// ring_chunk so the bytes are exactly build_schedule(kAllreduceRing)'s:
// repetition i sends chunk (r - i), rank r ends owning chunk (r + 1), which
// is ring_phases' shift 1. Segmented and pipelined (ring_phases.h).
#include "algorithms/algorithms.h"
#include "algorithms/ring_phases.h"

namespace weft::coll::internal {
namespace {

class Ring final : public Plan {
 public:
  explicit Ring(const Shape& s)
      : bytes_(s.count * s.esize),
        chunks_(ring_chunks(s.size, 0, s.count, s.esize, s.segment ? s.segment : kDefaultSegment)),
        peers_(ring_peers(s.rank, s.size)) {}
  size_t scratch_bytes() const override { return bytes_; }
  std::vector<int> peers() const override { return peers_; }
  Status run(Context& ctx) const override {
    ctx.step("ring-rs", 1);
    WEFT_RETURN_IF_ERROR(ring_reduce_scatter(ctx, chunks_, 1, /*answered=*/true));
    ctx.step("ring-ag", 1);
    return ring_allgather(ctx, chunks_, 1);
  }

 private:
  size_t bytes_;
  Chunks chunks_;
  std::vector<int> peers_;
};

}  // namespace

std::unique_ptr<Plan> plan_allreduce_ring(const Shape& s) {
  if (s.gates && !s.gates->empty()) return plan_allreduce_ring_gated(s);
  return std::make_unique<Ring>(s);
}

}  // namespace weft::coll::internal
