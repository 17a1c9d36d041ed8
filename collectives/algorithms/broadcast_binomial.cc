// Binomial-tree Broadcast (MPICH's MPIR_Bcast_binomial), segmented: a rank
// forwards each segment to its children as soon as it has it, so for large
// vectors the tree levels work at the same time.
//   vr = (rank - root) mod P; the parent is vr minus its lowest set bit; the
//   children are vr + 2^k for every 2^k below that bit (largest first).
#include "algorithms/algorithms.h"
#include "algorithms/segments.h"

namespace weft::coll::internal {
namespace {

constexpr size_t kBroadcastSegment = 256 << 10;

class Binomial final : public Plan {
 public:
  explicit Binomial(const Shape& s)
      : segs_(split(0, s.count, s.esize, s.segment ? s.segment : kBroadcastSegment)), es_(s.esize), me_(s.rank) {
    const int p = s.size, vr = (s.rank - s.root + p) % p;
    int mask = 1;
    while (mask < p) {
      if (vr & mask) {
        parent_ = (vr - mask + s.root) % p;
        break;
      }
      mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
      if (vr + mask < p) children_.push_back((vr + mask + s.root) % p);
    }
  }
  size_t scratch_bytes() const override { return 0; }
  std::vector<int> peers() const override {  // the parent and the children
    std::vector<int> out = children_;
    if (parent_ >= 0) out.push_back(parent_);
    return peer_set(std::move(out), me_);
  }

  Status run(Context& ctx) const override {
    ctx.step("bcast", 1);
    std::vector<Ticket> rt;
    if (parent_ >= 0) {
      for (const Segment& g : segs_) {
        WEFT_ASSIGN_OR_RETURN(Ticket t, ctx.recv(parent_, kData, g.lo * es_, g.n * es_));
        rt.push_back(t);
      }
    }
    for (size_t j = 0; j < segs_.size(); ++j) {
      if (parent_ >= 0) WEFT_RETURN_IF_ERROR(ctx.wait_recv(parent_, rt[j]));
      for (int c : children_) WEFT_RETURN_IF_ERROR(ctx.send(c, kData, segs_[j].lo * es_, segs_[j].n * es_).status());
    }
    return ctx.wait_all_sends();
  }

 private:
  std::vector<Segment> segs_;
  size_t es_;
  int me_;
  int parent_ = -1;
  std::vector<int> children_;
};

}  // namespace

std::unique_ptr<Plan> plan_broadcast_binomial(const Shape& s) { return std::make_unique<Binomial>(s); }

}  // namespace weft::coll::internal
