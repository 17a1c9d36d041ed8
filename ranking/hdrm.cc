// HDRM: Halving-Doubling with Rank Mapping on an M x N BiGraph (EFLOPS, HPCA
// 2020, §IV).
//
// N switches form two parts of N/2 (upper, lower), every upper switch linked
// to every lower one; each switch has M subnodes. One subnode per switch makes
// a logical group of N ranks. Inside group 0, rank r sits on the upper part
// iff popcount(r) is even: the pairs [0;1], [2;3] -> [3;2] (pair index with odd
// popcount swaps), giving X = [0,3,5,6] (upper), Y = [1,2,4,7] (lower) for
// N = 8. Then every HD partner r XOR 2^s differs in one bit, so its parity
// differs and it sits across the parts on a direct link.
//
// Group i takes [X + iN; Y + iN], swapped when popcount(i) is odd (so partners
// across groups, which differ in one bit of i, are again across the parts),
// and its upper vector is rotated by i positions, so that no two groups use
// the same upper–lower link in one step. That needs M <= N/2 rotations to be
// distinct, which is BiGraph's own constraint (M <= N/2 for a non-blocking
// switch). tests/ranking/hdrm_test.cc checks the claim with the link-load
// checker for N in {4..64} and every power-of-two M <= N/2.
#include <algorithm>
#include <bit>
#include <map>

#include <fmt/format.h>

#include "weft/ranking/rank_order.h"

namespace weft::ranking {

Result<RankOrder> rank_hdrm(const topo::Fabric& f, const std::vector<int>& allocation) {
  // Subnodes per switch, switches split by part.
  std::map<int, std::vector<int>> by_switch;
  for (int n : allocation) {
    int sw = f.nic_switch(n);
    if (f.switches[sw].part == topo::Part::kNone) {
      return failed_precondition(fmt::format(
          "hdrm needs a BiGraph fabric: {} attaches to switch '{}', which is in neither part (use --algo clos)",
          f.nic_qualified_name(n), f.switches[sw].name));
    }
    by_switch[sw].push_back(n);
  }
  std::vector<int> upper, lower;
  size_t m = by_switch.begin()->second.size();
  for (auto& [sw, nics] : by_switch) {
    if (nics.size() != m) {
      return failed_precondition(fmt::format(
          "hdrm needs the same number of subnodes on every switch: '{}' has {}, '{}' has {} (use --algo clos)",
          f.switches[by_switch.begin()->first].name, m, f.switches[sw].name, nics.size()));
    }
    std::sort(nics.begin(), nics.end());
    (f.switches[sw].part == topo::Part::kUpper ? upper : lower).push_back(sw);
  }
  if (upper.size() != lower.size()) {
    return failed_precondition(fmt::format(
        "hdrm needs as many upper as lower switches in the allocation (got {} upper, {} lower; use --algo clos)",
        upper.size(),
        lower.size()));
  }
  const size_t half = upper.size();
  const size_t n = 2 * half;
  const size_t groups = m;
  if (groups > half) {
    return failed_precondition(fmt::format(
        "hdrm: M = {} subnodes per switch exceeds N/2 = {} (an M x N BiGraph needs M <= N/2)", groups, half));
  }
  // The XOR partners of HD stay across the parts, and the rotations apart,
  // only when both are powers of two: with N/2 = 3 an HD step put 2 flows
  // on one upper-lower link where leaf sets put 1.
  if (!std::has_single_bit(half) || !std::has_single_bit(groups)) {
    return failed_precondition(fmt::format(
        "hdrm: N/2 = {} switches per part and M = {} subnodes per switch must both be powers of two (use --algo "
        "clos)", half, groups));
  }
  // Base group: pair k = [2k; 2k+1], swapped when popcount(k) is odd.
  std::vector<size_t> x(half), y(half);
  for (size_t k = 0; k < half; ++k) {
    size_t a = 2 * k, b = 2 * k + 1;
    if (std::popcount(k) % 2) std::swap(a, b);
    x[k] = a;
    y[k] = b;
  }
  RankOrder order;
  order.nics.assign(groups * n, -1);
  for (size_t i = 0; i < groups; ++i) {
    const bool swapped = std::popcount(i) % 2;
    const auto& up = swapped ? y : x;
    const auto& lo = swapped ? x : y;
    for (size_t j = 0; j < half; ++j) {
      // Upper switch j holds the upper vector rotated left by i.
      size_t r_up = up[(j + i) % half] + i * n;
      size_t r_lo = lo[j] + i * n;
      order.nics[r_up] = by_switch[upper[j]][i];
      order.nics[r_lo] = by_switch[lower[j]][i];
    }
  }
  return order;
}

}  // namespace weft::ranking
