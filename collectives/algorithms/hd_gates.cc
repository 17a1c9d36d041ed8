// Halving-doubling under a route plan with rounds: the plan's gates
// (routing/gates.h, docs/route-plan.md "Rounds") enforced with zero-byte
// tokens, so that no switch-to-switch link carries two flows at once.
//
// A gate {j, a, d, j'} makes rank a wait, before its data send of schedule
// step j, for a token from d, which d sends once its data of step j' is in.
// Tokens travel on the pair d -> a like data, and a pair's messages match
// receives in posting order with equal lengths (transport.h), so both ends
// agree on where each token sits among d's messages to a:
//   - d sends its tokens in step order; a token of step j' goes out while d
//     is in step j': to a rank other than its partner of j' as soon as its
//     data is in ("early": even while d still waits on its own gates), to
//     that partner only after d's own data send of j' ("late"), so that on
//     the pair d -> partner the data of j' always precedes the token of j'.
//   - a, before posting its data receive from partner d in step j, receives
//     every token from d of steps < j ("drain"); tokens of step j from the
//     partner never exist (that gate would order a flow after itself).
// Every token a receives is one of a's gates, so the pairs are empty of
// tokens when a call ends.
//
// No deadlock. Order the flow occurrences (flow, step) by slot (step,
// round); a gate's earlier flow is in a strictly earlier slot than the
// gated one (plan_gates). Induction over slots: assume every occurrence of
// a slot before s = (j, r) was sent and received, and every rank has left
// every step before j with its tokens of those steps sent. The sender a of
// an occurrence in s has then left its steps < j, its drain of step j is
// satisfied (tokens of steps < j), its data receive is posted, and each of
// its gate tokens belongs to an occurrence of an earlier slot, already
// received; its receiver d sent the token when it saw that data arrive —
// early tokens are sent from inside d's own gate wait, which polls d's
// receive until they are out, so d's own gates cannot hold them back. So a posts its send;
// the receiver posted its receive on entering step j; the occurrence
// completes. A rank leaves step j once its receive and send of j completed
// and its late tokens (after its own send) went out.
#include <algorithm>

#include "algorithms/allreduce_halving_doubling.h"

namespace weft::coll::internal {

namespace {

bool sends(HdStep::Kind k) { return k != HdStep::kFoldRecv && k != HdStep::kUnfoldRecv; }
bool receives(HdStep::Kind k) { return k != HdStep::kFoldSend && k != HdStep::kUnfoldSend; }

}  // namespace

void HalvingDoubling::take_gates(const std::vector<routing::Gate>& gates, int me, int size) {
  size_ = size;
  const std::vector<std::vector<int>> from = token_steps(gates, me, size);
  auto tokens_until = [&](int peer, int step, bool inclusive) {
    return internal::tokens_until(from, peer, step, inclusive);
  };
  std::vector<StepGates> per(steps_.size());
  bool any = false;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const HdStep& st = steps_[i];
    StepGates& sg = per[i];
    if (receives(st.kind)) sg.drain = tokens_until(st.peer, st.sched, false);
    for (const routing::Gate& g : gates) {
      if (g.waiter == me && g.step == st.sched && sends(st.kind)) {
        const int n = tokens_until(g.from, g.after_step, true);
        auto it = std::find_if(sg.waits.begin(), sg.waits.end(), [&](const auto& w) { return w.first == g.from; });
        if (it == sg.waits.end()) {
          sg.waits.emplace_back(g.from, n);
        } else {
          it->second = std::max(it->second, n);
        }
      }
      if (g.from == me && g.after_step == st.sched && receives(st.kind)) {
        (g.waiter == st.peer ? sg.late : sg.early).push_back(g.waiter);
      }
    }
    any = any || sg.any();
  }
  if (any) gated_ = std::move(per);
}

Status HalvingDoubling::run_gated(Context& ctx) const {
  const size_t es = esize_;
  GateTokens tokens(ctx, size_);
  for (size_t i = 0; i < steps_.size(); ++i) {
    const HdStep& st = steps_[i];
    const StepGates& sg = gated_[i];
    const bool rs = st.kind == HdStep::kRs;
    switch (st.kind) {
      case HdStep::kFoldSend:
      case HdStep::kUnfoldSend: {
        ctx.step(st.kind == HdStep::kFoldSend ? "fold" : "unfold", 1);
        bool none = true;
        WEFT_RETURN_IF_ERROR(tokens.wait_gates(sg, st.peer, 0, &none));
        WEFT_ASSIGN_OR_RETURN(Ticket s, ctx.send(st.peer, kData, st.send_lo * es, st.send_n * es));
        WEFT_RETURN_IF_ERROR(ctx.wait_send(st.peer, s));
        break;
      }
      case HdStep::kFoldRecv:
      case HdStep::kUnfoldRecv: {
        const bool fold = st.kind == HdStep::kFoldRecv;
        ctx.step(fold ? "fold" : "unfold", 1);
        WEFT_RETURN_IF_ERROR(tokens.drain(st.peer, sg.drain));
        WEFT_ASSIGN_OR_RETURN(Ticket r, ctx.recv(st.peer, fold ? kScratch : kData, st.recv_lo * es, st.recv_n * es));
        WEFT_RETURN_IF_ERROR(ctx.wait_recv(st.peer, r));
        WEFT_RETURN_IF_ERROR(tokens.emit(sg.early));
        WEFT_RETURN_IF_ERROR(tokens.emit(sg.late));
        if (fold) ctx.reduce(ctx.ptr(kData) + st.recv_lo * es, ctx.ptr(kScratch) + st.recv_lo * es, st.recv_n);
        break;
      }
      case HdStep::kRs:
      case HdStep::kAg: {
        ctx.step(rs ? "rs" : "ag", st.distance);
        // Drain the partner's earlier tokens, post the data receive, wait
        // this step's gates, post the send, wait both.
        WEFT_RETURN_IF_ERROR(tokens.drain(st.peer, sg.drain));
        WEFT_ASSIGN_OR_RETURN(Ticket r, ctx.recv(st.peer, rs ? kScratch : kData, st.recv_lo * es, st.recv_n * es));
        bool emitted = false;
        WEFT_RETURN_IF_ERROR(tokens.wait_gates(sg, st.peer, r, &emitted));
        WEFT_ASSIGN_OR_RETURN(Ticket s, ctx.send(st.peer, kData, st.send_lo * es, st.send_n * es));
        WEFT_RETURN_IF_ERROR(ctx.wait_recv(st.peer, r));
        if (!emitted) WEFT_RETURN_IF_ERROR(tokens.emit(sg.early));
        WEFT_RETURN_IF_ERROR(tokens.emit(sg.late));
        WEFT_RETURN_IF_ERROR(ctx.wait_send(st.peer, s));
        if (rs) ctx.reduce(ctx.ptr(kData) + st.recv_lo * es, ctx.ptr(kScratch) + st.recv_lo * es, st.recv_n);
        break;
      }
    }
  }
  return ctx.wait_all_sends();  // the tokens' sends
}

}  // namespace weft::coll::internal
