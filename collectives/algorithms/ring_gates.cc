// Ring AllReduce under a route plan with rounds: the plan's gates per
// repetition (routing::ring_plan_gates, docs/route-plan.md "Rounds")
// enforced with zero-byte tokens (gate_tokens.h), so that no
// switch-to-switch link carries two of the ring's flows at once.
//
// Repetition u (u < P-1: reduce-scatter repetition u; then allgather
// repetition u - (P-1)) runs, on rank r with prev = r-1 and next = r+1:
//   1. drain: receive prev's tokens of repetitions < u;
//   2. post the receive of this repetition's chunk from prev;
//   3. wait for this repetition's gate tokens, sending the early tokens the
//      moment the chunk is in (GateTokens::wait_gates);
//   4. send this repetition's chunk to next;
//   5. wait for the chunk (reduce it in reduce-scatter), then send the
//      tokens not yet sent: tokens to next only now ("late"), after this
//      repetition's data to next, so that on every pair r -> next the order
//      is data(0), tokens(0), data(1), tokens(1), ... — what next's drain of
//      step 1 and receive of step 2 expect.
// A token from rank d vouches that d has its chunk of the repetition the
// gate names; d sends it at step 5 of that repetition (or step 3's poll).
//
// No deadlock, by the argument of hd_gates.cc: order the flow occurrences
// (flow, repetition) by slot (repetition, round); a gate's earlier flow is
// in a strictly earlier slot (routing::plan_gates). If every occurrence of
// every slot before s = (u, k) has been sent and received and every rank
// has finished its repetitions before u, the sender a of an occurrence in s
// has its drain satisfied (prev finished repetition u-1), its receive
// posted, and each gate token's flow in an earlier slot, received, so the
// token was sent (at the receiver's step 5, or from inside its step 3 while
// it waited); its chunk to send is one it received in repetition u-1 (or
// its own), so it sends; the receiver posted its receive on entering u.
//
// The pipelining of the ungated ring (ring_phases.cc) is given up: a
// repetition's chunk is sent only once its gates allow, whole. Rounds are
// for links that would otherwise carry two flows; the time is the same.
#include <algorithm>

#include "algorithms/gate_tokens.h"
#include "algorithms/ring_phases.h"

namespace weft::coll::internal {
namespace {

class GatedRing final : public Plan {
 public:
  explicit GatedRing(const Shape& s)
      : p_(s.size),
        me_(s.rank),
        bytes_(s.count * s.esize),
        esize_(s.esize),
        chunks_(ring_chunks(s.size, 0, s.count, s.esize, s.segment ? s.segment : kDefaultSegment)) {
    const int reps = 2 * (p_ - 1), next = (me_ + 1) % p_;
    const auto from = token_steps(*s.gates, me_, p_);
    std::vector<int> talk = ring_peers(me_, p_);
    gated_.resize(static_cast<size_t>(reps));
    for (int u = 0; u < reps; ++u) {
      StepGates& sg = gated_[static_cast<size_t>(u)];
      sg.drain = tokens_until(from, (me_ + p_ - 1) % p_, u, false);
      for (const routing::Gate& g : *s.gates) {
        if (g.waiter == me_ && g.step == u) {
          const int n = tokens_until(from, g.from, g.after_step, true);
          auto it = std::find_if(sg.waits.begin(), sg.waits.end(), [&](const auto& w) { return w.first == g.from; });
          if (it == sg.waits.end()) {
            sg.waits.emplace_back(g.from, n);
          } else {
            it->second = std::max(it->second, n);
          }
          talk.push_back(g.from);
        }
        if (g.from == me_ && g.after_step == u) {
          (g.waiter == next ? sg.late : sg.early).push_back(g.waiter);
          talk.push_back(g.waiter);
        }
      }
    }
    peers_ = peer_set(std::move(talk), me_);
  }

  size_t scratch_bytes() const override { return bytes_; }
  std::vector<int> peers() const override { return peers_; }

  Status run(Context& ctx) const override {
    const int prev = (me_ + p_ - 1) % p_, next = (me_ + 1) % p_, reps = 2 * (p_ - 1);
    const size_t es = esize_;
    GateTokens tokens(ctx, p_);
    std::vector<Ticket> rt;
    for (int u = 0; u < reps; ++u) {
      const bool rs = u < p_ - 1;
      const int i = rs ? u : u - (p_ - 1);
      if (i == 0) ctx.step(rs ? "ring-rs" : "ring-ag", 1);
      // Shift 1 (ring_phases.h): rs sends chunk r - i, receives r - 1 - i;
      // ag sends r + 1 - i, receives r - i.
      const auto& out = chunk(rs ? me_ - i : me_ + 1 - i);
      const auto& in = chunk(rs ? me_ - 1 - i : me_ - i);
      const StepGates& sg = gated_[static_cast<size_t>(u)];
      WEFT_RETURN_IF_ERROR(tokens.drain(prev, sg.drain));
      rt.clear();
      for (const Segment& g : in) {
        WEFT_ASSIGN_OR_RETURN(Ticket t, ctx.recv(prev, rs ? kScratch : kData, g.lo * es, g.n * es));
        rt.push_back(t);
      }
      // An empty chunk (fewer elements than ranks) is in at once.
      bool emitted = rt.empty();
      if (emitted) WEFT_RETURN_IF_ERROR(tokens.emit(sg.early));
      WEFT_RETURN_IF_ERROR(tokens.wait_gates(sg, prev, rt.empty() ? Ticket{0} : rt.back(), &emitted));
      for (const Segment& g : out) WEFT_RETURN_IF_ERROR(ctx.send(next, kData, g.lo * es, g.n * es).status());
      for (size_t k = 0; k < in.size(); ++k) {
        WEFT_RETURN_IF_ERROR(ctx.wait_recv(prev, rt[k]));
        if (rs) ctx.reduce(ctx.ptr(kData) + in[k].lo * es, ctx.ptr(kScratch) + in[k].lo * es, in[k].n);
      }
      if (!emitted) WEFT_RETURN_IF_ERROR(tokens.emit(sg.early));
      WEFT_RETURN_IF_ERROR(tokens.emit(sg.late));
      // Allgather writes the chunks reduce-scatter sent from.
      if (u == p_ - 2) WEFT_RETURN_IF_ERROR(ctx.wait_all_sends());
    }
    return ctx.wait_all_sends();
  }

 private:
  const std::vector<Segment>& chunk(int c) const { return chunks_[static_cast<size_t>(((c % p_) + p_) % p_)]; }

  int p_, me_;
  size_t bytes_, esize_;
  Chunks chunks_;
  std::vector<StepGates> gated_;  // per repetition
  std::vector<int> peers_;
};

}  // namespace

std::unique_ptr<Plan> plan_allreduce_ring_gated(const Shape& s) { return std::make_unique<GatedRing>(s); }

}  // namespace weft::coll::internal
