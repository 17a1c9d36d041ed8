// Max-min fair rates by progressive filling.
//
// Flows share every directed link they cross. Max-min fairness (Bertsekas &
// Gallager, "Data Networks", 2nd ed., §6.5.2) is what TCP-like congestion
// control and RoCE's DCQCN approximate in steady state: no flow can get more
// without taking from one that has less. Progressive filling computes it
// exactly: raise every unfrozen flow's rate together until some link is
// full, freeze the flows on it, repeat (the order links fill in is kept in a
// heap, see max_min.cc).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace weft::routing {

class MaxMinFair {
 public:
  // capacity[l] in any unit (bytes/s); flows are given as lists of link ids.
  explicit MaxMinFair(std::vector<double> capacity);

  // Rates of the flows whose links are paths[i] (an empty path gets rate 0);
  // `active[i] == false` leaves flow i out (rate 0).
  const std::vector<double>& solve(std::span<const std::vector<int>> paths, std::span<const char> active);

 private:
  std::vector<double> capacity_;
  std::vector<double> left_;    // residual capacity per link
  std::vector<int> unfrozen_;   // unfrozen flows per link
  std::vector<int> used_;       // links touched this solve
  std::vector<double> rate_;
  std::vector<char> frozen_;
  std::vector<double> base_;       // level at which left_ was last brought up to date
  std::vector<unsigned> version_;  // heap entries of older versions are stale
  std::vector<size_t> start_, fill_;  // CSR: flows on link l are on_link_[start_[l] .. fill_[l])
  std::vector<int> on_link_;
  std::vector<int> touched_;
  std::vector<unsigned> queued_;  // == round_: already re-queued this round
  unsigned round_ = 0;
};

}  // namespace weft::routing
