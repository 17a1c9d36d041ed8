// Halving-doubling AllReduce (Rabenseifner, "Optimization of Collective
// Reduction Operations", ICCS 2004; Thakur, Rabenseifner & Gropp, IJHPCA 2005
// section 4 for the non-power-of-two fold, as MPICH implements it).
//
// The block maths are routing's (hd_layout, hd_block), so the bytes moved here
// are the flows the link-load checker and the route planner judge
// (tests/collectives/schedule_conformance_test.cc compares them).
//
//   fold      even rank 2i < 2*rem sends its vector to 2i+1 and sits out.
//   rs k      newrank v exchanges with v ^ 2^k: keeps hd_block(v, k+1),
//             receives it from the partner into scratch, reduces.
//   ag k      the mirror, k descending: send the block held, receive the
//             partner's block straight into the output.
//   unfold    2i+1 sends the result to 2i.
//
// Rounds (docs/route-plan.md "Rounds"): with a route plan whose flows are
// time-sliced, the plan's gates (routing/gates.h) are enforced with
// zero-byte tokens — hd_gates.cc; without them run() is the plain loop.
#include "algorithms/allreduce_halving_doubling.h"
#include "algorithms/pieces.h"

#include <fmt/format.h>

#include "weft/routing/schedule.h"

namespace weft::coll::internal {

HalvingDoubling::HalvingDoubling(const Shape& s) : esize_(s.esize), count_(s.count), me_(s.rank) {
  const routing::HdLayout L = routing::hd_layout(s.size);
  const int r = s.rank;
  const size_t all = s.count;
  if (r < 2 * L.rem) {
    if (r % 2 == 0) {
      steps_.push_back({HdStep::kFoldSend, r + 1, 1, 0, all, 0, 0, routing::hd_fold_step(L)});
      steps_.push_back({HdStep::kUnfoldRecv, r + 1, 1, 0, 0, 0, all, routing::hd_unfold_step(L)});
      finish(s);
      return;
    }
    steps_.push_back({HdStep::kFoldRecv, r - 1, 1, 0, 0, 0, all, routing::hd_fold_step(L)});
  }
  const int v = L.newrank(r);
  const int levels = L.log2_pof2();
  for (int k = 0; k < levels; ++k) {
    const int w = v ^ (1 << k);
    routing::Range keep = routing::hd_block(L, v, k + 1, s.count);
    routing::Range give = routing::hd_block(L, w, k + 1, s.count);
    steps_.push_back({HdStep::kRs, L.rank_of(w), 1 << k, give.lo, give.size(), keep.lo, keep.size(),
                      routing::hd_rs_step(L, k)});
  }
  for (int k = levels - 1; k >= 0; --k) {
    const int w = v ^ (1 << k);
    routing::Range held = routing::hd_block(L, v, k + 1, s.count);
    routing::Range got = routing::hd_block(L, w, k + 1, s.count);
    steps_.push_back({HdStep::kAg, L.rank_of(w), 1 << k, held.lo, held.size(), got.lo, got.size(),
                      routing::hd_ag_step(L, k)});
  }
  if (r < 2 * L.rem) {
    steps_.push_back({HdStep::kUnfoldSend, r - 1, 1, 0, all, 0, 0, routing::hd_unfold_step(L)});
  }
  finish(s);
}

// The vector starts at element `offset` of kData (the hybrid's leg); gates
// only when the plan's ranks are this group's (the communicator decides).
void HalvingDoubling::finish(const Shape& s) {
  count_ += s.offset;
  for (HdStep& st : steps_) {
    st.send_lo += s.offset;
    st.recv_lo += s.offset;
  }
  if (s.gates != nullptr && !s.gates->empty()) take_gates(*s.gates, s.rank, s.size);
}

void HalvingDoubling::join_group(const std::vector<int>& members, int size, const std::vector<routing::Gate>& gates) {
  for (HdStep& st : steps_) st.peer = members[static_cast<size_t>(st.peer)];
  me_ = members[static_cast<size_t>(me_)];
  if (!gates.empty()) take_gates(gates, me_, size);
}

Status HalvingDoubling::run(Context& ctx) const {
  if (!gated_.empty()) return run_gated(ctx);  // hd_gates.cc
  const size_t es = esize_;
  char* d = ctx.ptr(kData);
  char* t = ctx.ptr(kScratch);
  for (const HdStep& st : steps_) {
    switch (st.kind) {
      case HdStep::kFoldSend:
      case HdStep::kUnfoldSend: {
        ctx.step(st.kind == HdStep::kFoldSend ? "fold" : "unfold", 1);
        // The fold's partner answers with the whole result (unfold): held.
        WEFT_ASSIGN_OR_RETURN(Ticket s, st.kind == HdStep::kFoldSend
                                            ? ctx.send_held(st.peer, kData, st.send_lo * es, st.send_n * es)
                                            : ctx.send(st.peer, kData, st.send_lo * es, st.send_n * es));
        WEFT_RETURN_IF_ERROR(ctx.wait_send(st.peer, s));
        break;
      }
      case HdStep::kFoldRecv: {
        ctx.step("fold", 1);
        WEFT_ASSIGN_OR_RETURN(Ticket r, ctx.recv(st.peer, kScratch, st.recv_lo * es, st.recv_n * es));
        WEFT_RETURN_IF_ERROR(ctx.wait_recv(st.peer, r));
        ctx.reduce(d + st.recv_lo * es, t + st.recv_lo * es, st.recv_n);
        break;
      }
      case HdStep::kUnfoldRecv: {
        ctx.step("unfold", 1);
        WEFT_ASSIGN_OR_RETURN(Ticket r, ctx.recv(st.peer, kData, st.recv_lo * es, st.recv_n * es));
        WEFT_RETURN_IF_ERROR(ctx.wait_recv(st.peer, r));
        break;
      }
      case HdStep::kRs: {
        ctx.step("rs", st.distance);
        // The kept block is reduced as it arrives where the transport can
        // (shm: from the ring; Context::sendrecv_reduce). The sent block is
        // held: this partner's allgather step sends it back reduced, and no
        // step before that writes it.
        WEFT_RETURN_IF_ERROR(ctx.sendrecv_reduce(st.peer, kData, st.send_lo * es, st.send_n * es, kScratch,
                                                 st.recv_lo * es, st.recv_n * es, d + st.recv_lo * es));
        break;
      }
      case HdStep::kAg: {
        ctx.step("ag", st.distance);
        WEFT_RETURN_IF_ERROR(exchange(ctx, st.peer, kData, st.send_lo * es, st.send_n * es, st.peer,
                                      kData, st.recv_lo * es, st.recv_n * es));
        break;
      }
    }
  }
  return ok_status();
}

std::vector<int> HalvingDoubling::peers() const {
  std::vector<int> out;
  for (const HdStep& st : steps_) out.push_back(st.peer);
  for (const StepGates& g : gated_) {
    for (const auto& [from, n] : g.waits) out.push_back(from);
    out.insert(out.end(), g.early.begin(), g.early.end());
    out.insert(out.end(), g.late.begin(), g.late.end());
  }
  return peer_set(std::move(out), me_);
}

namespace {
std::unique_ptr<Plan> plan_whole(const Shape& s) { return std::make_unique<HalvingDoubling>(s); }
}  // namespace

// In pieces (pieces.h) when the vector is larger than one; never with
// gates, which name whole steps of one HD.
std::unique_ptr<Plan> plan_allreduce_hd(const Shape& s) {
  if (s.piece > 0 && s.count * s.esize > s.piece && (s.gates == nullptr || s.gates->empty())) {
    Shape whole = s;
    whole.piece = 0;
    return plan_in_pieces(whole, s.piece, plan_whole);
  }
  return plan_whole(s);
}

}  // namespace weft::coll::internal
