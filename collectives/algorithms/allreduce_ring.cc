// Ring AllReduce: reduce-scatter then allgather around r -> r+1 (Patarasuk &
// Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
// workstations", JPDC 2009; NCCL's ring, seed 001), chunked as routing's
// ring_chunk so the bytes are exactly build_schedule(kAllreduceRing)'s.
//
// Pipelining (NCCL's chunk steps): every chunk is cut into segments; as soon
// as one segment of a chunk has arrived and been reduced it is forwarded, so
// the ring carries data in every link at once instead of one chunk per step.
// All receives of a phase are posted up front (each chunk has its own place
// in scratch or in the output), so a one-sided transport has its credits
// before the data exists.
//   reduce-scatter repetition i: send chunk (r - i), receive (r - i - 1);
//   rank r ends owning chunk (r + 1).
//   allgather repetition i: send chunk (r + 1 - i), receive (r - i).
#include "algorithms/algorithms.h"
#include "algorithms/segments.h"
#include "weft/routing/schedule.h"

namespace weft::coll::internal {
namespace {

constexpr size_t kDefaultSegment = 512 << 10;

class Ring final : public Plan {
 public:
  explicit Ring(const Shape& s) : p_(s.size), r_(s.rank), es_(s.esize), count_(s.count) {
    const size_t seg = s.segment ? s.segment : kDefaultSegment;
    for (int c = 0; c < p_; ++c) {
      routing::Range cr = routing::ring_chunk(p_, c, s.count);
      segs_.push_back(split(cr.lo, cr.size(), es_, seg));
    }
  }
  size_t scratch_bytes() const override { return count_ * es_; }

  Status run(Context& ctx) const override {
    const int next = (r_ + 1) % p_, prev = (r_ + p_ - 1) % p_;
    auto chunk = [&](int c) -> const std::vector<Segment>& { return segs_[static_cast<size_t>(((c % p_) + p_) % p_)]; };
    char* d = ctx.ptr(kData);
    char* t = ctx.ptr(kScratch);

    ctx.step("ring-rs", 1);
    std::vector<Ticket> rt;
    for (int i = 0; i + 1 < p_; ++i) {
      for (const Segment& g : chunk(r_ - i - 1)) {
        WEFT_ASSIGN_OR_RETURN(Ticket tk, ctx.recv(prev, kScratch, g.lo * es_, g.n * es_));
        rt.push_back(tk);
      }
    }
    for (const Segment& g : chunk(r_)) WEFT_RETURN_IF_ERROR(ctx.send(next, kData, g.lo * es_, g.n * es_).status());
    size_t k = 0;
    for (int i = 0; i + 1 < p_; ++i) {
      for (const Segment& g : chunk(r_ - i - 1)) {
        WEFT_RETURN_IF_ERROR(ctx.wait_recv(prev, rt[k++]));
        ctx.reduce(d + g.lo * es_, t + g.lo * es_, g.n);
        if (i + 2 < p_) WEFT_RETURN_IF_ERROR(ctx.send(next, kData, g.lo * es_, g.n * es_).status());
      }
    }
    // The allgather overwrites chunks that reduce-scatter sent from.
    WEFT_RETURN_IF_ERROR(ctx.wait_all_sends());

    ctx.step("ring-ag", 1);
    rt.clear();
    for (int i = 0; i + 1 < p_; ++i) {
      for (const Segment& g : chunk(r_ - i)) {
        WEFT_ASSIGN_OR_RETURN(Ticket tk, ctx.recv(prev, kData, g.lo * es_, g.n * es_));
        rt.push_back(tk);
      }
    }
    for (const Segment& g : chunk(r_ + 1)) WEFT_RETURN_IF_ERROR(ctx.send(next, kData, g.lo * es_, g.n * es_).status());
    k = 0;
    for (int i = 0; i + 1 < p_; ++i) {
      for (const Segment& g : chunk(r_ - i)) {
        WEFT_RETURN_IF_ERROR(ctx.wait_recv(prev, rt[k++]));
        if (i + 2 < p_) WEFT_RETURN_IF_ERROR(ctx.send(next, kData, g.lo * es_, g.n * es_).status());
      }
    }
    return ctx.wait_all_sends();
  }

 private:
  int p_, r_;
  size_t es_, count_;
  std::vector<std::vector<Segment>> segs_;
};

}  // namespace

std::unique_ptr<Plan> plan_allreduce_ring(const Shape& s) { return std::make_unique<Ring>(s); }

}  // namespace weft::coll::internal
