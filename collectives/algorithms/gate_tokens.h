// The zero-byte tokens that hold a flow back until the flows before it on
// each of its links have been received (routing/gates.h, docs/route-plan.md
// "Rounds"), shared by halving-doubling (hd_gates.cc) and ring
// (ring_gates.cc). Each algorithm says, per step of its own, which tokens a
// rank drains, waits for and sends; GateTokens posts and matches them.
#pragma once

#include <utility>
#include <vector>

#include "context.h"
#include "weft/routing/gates.h"

namespace weft::coll::internal {

// This rank's share of the plan's gates in one step of an algorithm.
struct StepGates {
  int drain = 0;  // tokens from the data partner that precede its data of this step (FIFO per pair)
  std::vector<std::pair<int, int>> waits;  // (peer, n): the first n tokens from peer, before sending
  std::vector<int> early;  // token to these ranks as soon as this step's data is in
  std::vector<int> late;   // token to the rank this step sends to: after this rank's own data send
  bool any() const { return drain > 0 || !waits.empty() || !early.empty() || !late.empty(); }
};

// Token bookkeeping of one call.
class GateTokens {
 public:
  GateTokens(Context& ctx, int size)
      : ctx_(ctx), posted_(static_cast<size_t>(size), 0), last_(static_cast<size_t>(size), 0) {}

  // Posts receives for tokens from `peer` up to the n-th; the ticket of the
  // n-th, or 0 when it was posted (and waited for) in an earlier wait.
  Result<Ticket> post_until(int peer, int n);
  // Receives the partner's tokens that precede its data of this step.
  Status drain(int peer, int n);
  Status emit(const std::vector<int>& to);
  // Waits for this step's gate tokens. Until the data receive `data` from
  // `partner` completes (data == 0: the step receives nothing), it polls
  // both, so that the early tokens go out the moment the data is in even
  // while this rank still waits; after that it blocks (a transport's own
  // wait sleeps; polling many ranks on few cores would starve the very
  // ranks it waits for). `*emitted` tells whether it sent the early tokens.
  Status wait_gates(const StepGates& sg, int partner, Ticket data, bool* emitted);

 private:
  Context& ctx_;
  std::vector<int> posted_;   // token receives posted, by peer
  std::vector<Ticket> last_;  // ticket of the last of them
  std::vector<std::pair<int, Ticket>> need_;
};

// The steps of the tokens each peer sends `me`, ascending (the order in
// which they arrive on the pair), from the gates whose waiter is `me`.
std::vector<std::vector<int>> token_steps(const std::vector<routing::Gate>& gates, int me, int size);
// How many of `peer`'s tokens to this rank vouch for steps before `step`
// (or up to it, inclusive).
int tokens_until(const std::vector<std::vector<int>>& steps, int peer, int step, bool inclusive);

}  // namespace weft::coll::internal
