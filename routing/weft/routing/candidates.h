// The route planner's candidates for one class of flows, stored flat.
//
// Per flow: the source ports the path table offered and the routes they
// land on, whether each route is usable (over links that are up), and on a
// 2-tier Clos the usable routes' spines (the flow's colour list). A class
// holds up to one flow per rank (65,536 at the largest scale we plan), so the
// store keeps one array per field instead of several small vectors per flow:
// ~10^5 allocations and their scattered first-touch page faults cost more
// than the planning itself (bench/routing_bench, BM_PlanHd).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "weft/routing/path_table.h"

namespace weft::routing {

class CandidateStore {
 public:
  // Forgets every flow; `flows` x `ports_per_flow` sizes the first class.
  void clear(size_t flows, size_t ports_per_flow);

  // Appends a flow's candidates, the table's answer, and returns its index:
  // every route unusable until evaluate() has run for the flow (once, and
  // before any strike()).
  int add_unevaluated(const PairRoutes& pr) {
    Entry e = start();
    e.n_ports = static_cast<uint32_t>(pr.ports.size());
    ports_.insert(ports_.end(), pr.ports.begin(), pr.ports.end());
    e.n_routes = static_cast<uint32_t>(pr.num_routes());
    // The table's routes are flat already: one copy for all, then the ends
    // shifted by where they start here.
    const uint32_t n_hops = pr.num_routes() == 0 ? 0 : pr.ends.back();
    hops_.insert(hops_.end(), pr.hops.begin(), pr.hops.begin() + n_hops);
    const size_t ends_at = route_end_.size();
    route_end_.resize(ends_at + pr.num_routes());
    usable_.resize(ends_at + pr.num_routes(), 0);
    for (size_t r = 0; r < pr.num_routes(); ++r) route_end_[ends_at + r] = e.hop_at + pr.ends[r];
    entries_.push_back(e);
    return static_cast<int>(entries_.size()) - 1;
  }
  // Evaluates usable(route) and colour(route) (< 0: none) once per route of
  // flow c; its colours are appended.
  template <class Usable, class Colour>
  void evaluate(int c, Usable&& usable, Colour&& colour) {
    Entry& e = entries_[static_cast<size_t>(c)];
    e.colour_at = static_cast<uint32_t>(colours_.size());
    e.n_colours = 0;
    for (size_t r = 0; r < e.n_routes; ++r) {
      const auto rt = route(c, r);
      const bool ok = usable(rt);
      usable_[e.route_at + r] = ok;
      const int col = ok ? colour(rt) : -1;
      if (col >= 0) {
        colours_.push_back(col);
        colour_route_.push_back(static_cast<int>(r));
        ++e.n_colours;
      }
    }
  }
  // A flow with no candidates (both ends on one leaf).
  int add_empty();

  std::span<const PortRoute> ports(int c) const {
    const Entry& e = at(c);
    return {ports_.data() + e.port_at, e.n_ports};
  }
  size_t num_routes(int c) const { return at(c).n_routes; }
  std::span<const int> route(int c, size_t r) const {
    const Entry& e = at(c);
    const uint32_t b = r == 0 ? e.hop_at : route_end_[e.route_at + r - 1];
    return {hops_.data() + b, route_end_[e.route_at + r] - b};
  }
  bool usable(int c, size_t r) const { return usable_[at(c).route_at + r] != 0; }
  // The usable routes' colours and, position for position, their routes.
  std::span<const int> colours(int c) const {
    const Entry& e = at(c);
    return {colours_.data() + e.colour_at, e.n_colours};
  }
  std::span<const int> colour_routes(int c) const {
    const Entry& e = at(c);
    return {colour_route_.data() + e.colour_at, e.n_colours};
  }
  // Route r of flow c becomes unusable (its ports ran out).
  void strike(int c, int r);

 private:
  struct Entry {
    uint32_t port_at = 0, n_ports = 0;
    uint32_t hop_at = 0, route_at = 0, n_routes = 0;  // route i ends at route_end_[route_at + i]
    uint32_t colour_at = 0, n_colours = 0;
  };
  Entry start() const;
  const Entry& at(int c) const { return entries_[static_cast<size_t>(c)]; }

  std::vector<Entry> entries_;
  std::vector<PortRoute> ports_;
  std::vector<int> hops_;
  std::vector<uint32_t> route_end_;
  std::vector<char> usable_;
  std::vector<int> colours_, colour_route_;
};

}  // namespace weft::routing
