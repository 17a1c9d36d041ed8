#include "weft/routing/auto_order.h"

#include <algorithm>

#include <fmt/format.h>

#include "weft/routing/hybrid_schedule.h"
#include "weft/routing/link_load.h"

namespace weft::routing {

namespace {

// The count the candidates are weighed at: 64 MiB of 4-byte elements per
// rank, weft check's default size. Any count large enough that HD's halves
// do not round to nothing gives the same ratios.
constexpr uint64_t kCount = uint64_t{1} << 24;
constexpr uint32_t kElem = 4;

Result<AutoCandidate> weigh(const topo::Fabric& f, const ranking::RankOrder& order, ranking::RankAlgo algo,
                            Collective c, const NcclRingShape& shape) {
  WEFT_ASSIGN_OR_RETURN(auto sched, build_fabric_schedule(f, order, c, kCount, kElem, shape));
  AutoCandidate out;
  out.algo = algo;
  for (const auto& st : sched.steps) {
    uint64_t largest = 0;
    for (const auto& fl : st.flows) largest = std::max(largest, fl.bytes);
    const int bound = step_lower_bound(f, order, st);
    out.max_bound = std::max(out.max_bound, bound);
    out.bound_vectors += static_cast<double>(bound) * static_cast<double>(largest) / static_cast<double>(kCount * kElem);
  }
  return out;
}

std::string name(ranking::RankAlgo a) { return std::string(ranking::rank_algo_name(a)); }

std::string explain(const AutoCandidate& won, const AutoCandidate& lost, Collective c) {
  if (won.bound_vectors < lost.bound_vectors) {
    return fmt::format(
        "its link-load bound for {} is lower (the busiest link of each step, summed over the steps, carries {:.2f} "
        "vectors with {}, {:.2f} with {}; largest step bound {} vs {})",
        collective_name(c), won.bound_vectors, name(won.algo), lost.bound_vectors, name(lost.algo), won.max_bound,
        lost.max_bound);
  }
  return fmt::format(
      "its link-load bound for {} is no higher than {}'s ({:.2f} vectors on the busiest links summed over the steps, "
      "largest step bound {}, vs {:.2f} and {}), and it is the fabric's own order",
      collective_name(c), name(lost.algo), won.bound_vectors, won.max_bound, lost.bound_vectors, lost.max_bound);
}

}  // namespace

Result<AutoOrder> auto_order(const topo::Fabric& f, const std::vector<int>& allocation, Collective c,
                             const NcclRingShape& shape) {
  AutoOrder out;
  if (c == Collective::kAllreduceRing || c == Collective::kNcclRing) {
    // A ring's order is the ring order on every fabric (one leaf crossing
    // per used leaf, docs/ranking.md), as weft sim's (c) runs rings.
    WEFT_ASSIGN_OR_RETURN(out.order, ranking::rank(f, allocation, ranking::RankAlgo::kRing));
    out.algo = ranking::RankAlgo::kRing;
    out.why = fmt::format("{} is a ring: the ring order crosses each used leaf once", collective_name(c));
    return out;
  }
  const ranking::RankAlgo own = ranking::resolve_auto(f, allocation);
  if (f.kind == topo::FabricKind::kBiGraph && own != ranking::RankAlgo::kHdrm) {
    // resolve_auto fell back to leaf sets: hdrm's refusal says why.
    out.why = std::string(ranking::rank_hdrm(f, allocation).status().message());
  }
  WEFT_ASSIGN_OR_RETURN(out.order, ranking::rank(f, allocation, own));
  out.algo = own;
  if (own == ranking::RankAlgo::kClos || own == ranking::RankAlgo::kHdrm) return out;

  WEFT_ASSIGN_OR_RETURN(auto clos_order, ranking::rank(f, allocation, ranking::RankAlgo::kClos));
  auto mine = weigh(f, out.order, own, c, shape);
  auto clos = weigh(f, clos_order, ranking::RankAlgo::kClos, c, shape);
  if (!mine || !clos) {
    // Both orders see the same hosts, so a schedule that cannot be built
    // (hybrid on hosts with unequal rank counts) fails for both.
    out.why = fmt::format("{} cannot be weighed on this allocation ({}), so auto keeps the fabric's own order",
                          collective_name(c), (mine ? clos : mine).status().message());
    return out;
  }
  out.weighed = {*mine, *clos};
  if (clos->bound_vectors < mine->bound_vectors) {
    out.algo = ranking::RankAlgo::kClos;
    out.order = std::move(clos_order);
    out.why = explain(*clos, *mine, c);
  } else {
    out.why = explain(*mine, *clos, c);
  }
  return out;
}

}  // namespace weft::routing
