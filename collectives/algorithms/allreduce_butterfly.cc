// Butterfly (recursive doubling) AllReduce for small vectors: log2(p) steps,
// each an exchange of the whole vector with newrank v ^ 2^k and a local
// reduce (Thakur, Rabenseifner & Gropp 2005, section 3): for small messages
// few steps on one stream beat a root-based scheme.
// Non-power-of-two ranks fold first as in HD (MPICH). Both partners compute
// x_v op x_w, which is bitwise the same for commutative ops, so every rank
// ends with identical bits.
#include "algorithms/algorithms.h"
#include "weft/routing/schedule.h"

namespace weft::coll::internal {
namespace {

class Butterfly final : public Plan {
 public:
  explicit Butterfly(const Shape& s) : bytes_(s.count * s.esize), count_(s.count), me_(s.rank) {
    const routing::HdLayout L = routing::hd_layout(s.size);
    const int r = s.rank;
    if (r < 2 * L.rem) {
      fold_peer_ = r % 2 == 0 ? r + 1 : r - 1;
      folded_out_ = r % 2 == 0;
    }
    if (folded_out_) return;
    const int v = L.newrank(r);
    for (int k = 0; k < L.log2_pof2(); ++k) partners_.push_back(L.rank_of(v ^ (1 << k)));
  }
  size_t scratch_bytes() const override { return bytes_; }
  std::vector<int> peers() const override {
    std::vector<int> out = partners_;
    if (fold_peer_ >= 0) out.push_back(fold_peer_);
    return peer_set(std::move(out), me_);
  }

  Status run(Context& ctx) const override {
    if (fold_peer_ >= 0) {
      ctx.step("fold", 1);
      if (folded_out_) {
        WEFT_ASSIGN_OR_RETURN(Ticket r, ctx.recv(fold_peer_, kData, 0, bytes_));
        WEFT_ASSIGN_OR_RETURN(Ticket s, ctx.send(fold_peer_, kData, 0, bytes_));
        // The result comes back into the same memory only after the send
        // left it: the partner's unfold waits for its own steps.
        WEFT_RETURN_IF_ERROR(ctx.wait_send(fold_peer_, s));
        ctx.step("unfold", 1);
        return ctx.wait_recv(fold_peer_, r);
      }
      WEFT_ASSIGN_OR_RETURN(Ticket r, ctx.recv(fold_peer_, kScratch, 0, bytes_));
      WEFT_RETURN_IF_ERROR(ctx.wait_recv(fold_peer_, r));
      ctx.reduce(ctx.ptr(kData), ctx.ptr(kScratch), count_);
    }
    int distance = 1;
    for (int peer : partners_) {
      ctx.step("butterfly", distance);
      distance *= 2;
      // Where the pair can, the peer's vector is reduced straight from the
      // transport's buffer into the data (Context::reduces_over_send).
      if (ctx.reduces_over_send(peer, bytes_)) {
        if (Status s = ctx.sendrecv_reduce(peer, kData, 0, bytes_, kScratch, 0, bytes_, ctx.ptr(kData)); !s) return s;
        continue;
      }
      if (Status s = exchange(ctx, peer, kData, 0, bytes_, peer, kScratch, 0, bytes_); !s) return s;  // no copy of an OK Status
      ctx.reduce(ctx.ptr(kData), ctx.ptr(kScratch), count_);
    }
    if (fold_peer_ >= 0) {
      ctx.step("unfold", 1);
      WEFT_ASSIGN_OR_RETURN(Ticket s, ctx.send(fold_peer_, kData, 0, bytes_));
      return ctx.wait_send(fold_peer_, s);
    }
    return ok_status();
  }

 private:
  size_t bytes_, count_;
  int me_;
  int fold_peer_ = -1;
  bool folded_out_ = false;
  std::vector<int> partners_;
};

}  // namespace

std::unique_ptr<Plan> plan_allreduce_butterfly(const Shape& s) { return std::make_unique<Butterfly>(s); }

}  // namespace weft::coll::internal
