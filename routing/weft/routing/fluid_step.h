// One step of the flow-level simulator: flows that start together and share
// directed links max-min fairly, run until the last one finishes.
//
// Event-driven fluid model: rates are the max-min fair allocation
// (max_min.h); when flows finish, the survivors' rates are recomputed only
// if they can have changed. An allocation is max-min fair iff every flow has
// a bottleneck link, a saturated link on which no flow gets more than it
// (Bertsekas & Gallager, "Data Networks", 2nd ed., §6.5.2). Removing
// finished flows frees capacity only on the links they crossed, so a
// surviving flow whose bottleneck none of them crossed keeps that bottleneck
// and its rate; when every survivor keeps one, the old rates are still the
// max-min fair allocation and no solve is needed. When flows of equal size
// start together (every step of HD and ring), the fastest finish first and
// never cross a slower flow's bottleneck, so a step takes one solve however
// many distinct finish times it has: at 65,536 flows that is the difference
// between seconds and hours.
#pragma once

#include <span>
#include <vector>

#include "weft/common/status.h"
#include "weft/routing/max_min.h"

namespace weft::routing {

struct FluidResult {
  double seconds = 0;  // when the last flow finished
  int events = 0;      // distinct finish times
  int solves = 0;      // max-min allocations computed
};

class FluidStep {
 public:
  // capacity[l] of directed link l in bytes/s.
  explicit FluidStep(std::vector<double> capacity);

  // links[i]: flow i's directed links (every capacity > 0, or the flow never
  // finishes: an error); bytes[i] what it carries (0: done at once).
  Result<FluidResult> run(std::span<const std::vector<int>> links, std::span<const double> bytes);

 private:
  void solve(std::span<const std::vector<int>> links, double now);
  bool keeps_bottleneck(const std::vector<int>& path, double rate) const;

  std::vector<double> capacity_;
  MaxMinFair mm_;
  // Per flow.
  std::vector<double> left_, rate_, finish_;
  std::vector<char> active_;
  std::vector<size_t> order_;  // active flows by finish time
  double epoch_ = 0;           // when rate_ was computed (left_ is as of then)
  // Per directed link, as of the last solve.
  std::vector<double> sum_, max_rate_;
  std::vector<char> dirty_;  // crossed by a flow that finished since
  std::vector<int> used_;
  std::vector<size_t> start_, fill_;  // CSR: flows on link l are on_link_[start_[l] .. fill_[l])
  std::vector<size_t> on_link_;
};

}  // namespace weft::routing
