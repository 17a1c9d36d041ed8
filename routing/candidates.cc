#include "weft/routing/candidates.h"

#include <algorithm>

#include "weft/common/huge_pages.h"

namespace weft::routing {

void CandidateStore::clear(size_t flows, size_t ports_per_flow) {
  entries_.clear();
  ports_.clear();
  hops_.clear();
  route_end_.clear();
  usable_.clear();
  colours_.clear();
  colour_route_.clear();
  // Sized for a class on first use and kept: later classes write into pages
  // already faulted in (huge ones where the kernel allows, huge_pages.h).
  // (At most 64 ports a flow: a probe database may offer a thousand to a
  // few pairs, and the vectors grow where a class needs more.)
  const size_t ports = flows * std::min<size_t>(ports_per_flow, 64);
  reserve_huge(entries_, flows);
  reserve_huge(ports_, ports);
  reserve_huge(hops_, 5 * ports);  // routes <= ports, 3 switches on 2 tiers, 5 on 3
  reserve_huge(route_end_, ports);
  reserve_huge(usable_, ports);
  reserve_huge(colours_, ports);
  reserve_huge(colour_route_, ports);
}

CandidateStore::Entry CandidateStore::start() const {
  Entry e;
  e.port_at = static_cast<uint32_t>(ports_.size());
  e.hop_at = static_cast<uint32_t>(hops_.size());
  e.route_at = static_cast<uint32_t>(route_end_.size());
  e.colour_at = static_cast<uint32_t>(colours_.size());
  return e;
}

int CandidateStore::add_empty() {
  entries_.push_back(start());
  return static_cast<int>(entries_.size()) - 1;
}

void CandidateStore::strike(int c, int r) {
  Entry& e = entries_[static_cast<size_t>(c)];
  usable_[e.route_at + static_cast<uint32_t>(r)] = 0;
  const auto b = colour_route_.begin() + e.colour_at, end = b + e.n_colours;
  const auto it = std::find(b, end, r);
  if (it == end) return;
  const auto k = it - colour_route_.begin();
  // Close the gap inside this flow's segment; the slot after it goes unused.
  std::copy(it + 1, end, it);
  std::copy(colours_.begin() + k + 1, colours_.begin() + e.colour_at + e.n_colours, colours_.begin() + k);
  --e.n_colours;
}

}  // namespace weft::routing
