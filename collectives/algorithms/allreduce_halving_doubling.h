// Halving-doubling AllReduce's plan (internal): allreduce_halving_doubling.cc
// builds the steps and runs them; hd_gates.cc enforces a route plan's rounds.
#pragma once

#include <utility>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/gate_tokens.h"

namespace weft::coll::internal {

struct HdStep {
  enum Kind { kFoldSend, kFoldRecv, kRs, kAg, kUnfoldSend, kUnfoldRecv } kind;
  int peer;        // group index
  int distance;    // for tracing: 2^k, or 1 for fold/unfold
  size_t send_lo, send_n;  // elements
  size_t recv_lo, recv_n;
  int sched;       // index in routing::build_schedule(kAllreduceHd).steps (routing::hd_*_step)
};

class HalvingDoubling final : public Plan {
 public:
  explicit HalvingDoubling(const Shape& s);

  // Received halves land in scratch at their own offsets (never more than
  // half the vector, but keeping offsets avoids any index translation).
  size_t scratch_bytes() const override { return count_ * esize_; }
  Status run(Context& ctx) const override;
  // The partners of the steps, and the ranks tokens come from or go to.
  std::vector<int> peers() const override;
  // Hybrid's inter-host leg under a route plan with rounds
  // (allreduce_hybrid.cc): this HD, planned on the leg's ranks, runs in the
  // context of a group of `size` that holds them at group indices
  // `members` (by leg index), and holds `gates` (ranks = that group's
  // indices), whose tokens may come from or go to ranks of other legs.
  void join_group(const std::vector<int>& members, int size, const std::vector<routing::Gate>& gates);

 private:
  void finish(const Shape& s);
  void take_gates(const std::vector<routing::Gate>& gates, int me, int size);
  Status run_gated(Context& ctx) const;

  size_t esize_;
  size_t count_;
  int me_ = 0;
  int size_ = 0;
  std::vector<HdStep> steps_;
  std::vector<StepGates> gated_;  // parallel to steps_; empty = no gate concerns this rank
};

}  // namespace weft::coll::internal
