// Shortest paths through a fabric, with the choice points left open.
//
// Clos and BiGraph fabrics route on shortest paths; where several next hops
// tie (a leaf's uplinks, a BiGraph switch reaching the other part), the caller
// chooses: an ECMP model hashes, the planner assigns, the checker's "ideal"
// balances. Links that are down are never used.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "weft/common/status.h"
#include "weft/topology/fabric.h"

namespace weft::routing {

// A path is the directed links from the source NIC to the destination NIC.
struct Path {
  std::vector<int> dlinks;
  friend bool operator==(const Path&, const Path&) = default;
};

class PathFinder {
 public:
  explicit PathFinder(const topo::Fabric& f);

  // Picks one of `candidates` (directed links out of switch `sw`, all on a
  // shortest path); returns an index into candidates.
  using Chooser = std::function<size_t(int sw, std::span<const int> candidates)>;

  // Routes src NIC -> dst NIC. Fails when a needed link is down or no path
  // exists, naming the NICs.
  Result<Path> route(int src_nic, int dst_nic, const Chooser& choose);

  // Routes through an explicit switch sequence (a plan's "path"), checking
  // that consecutive switches are linked and that these links and both
  // access links are up.
  Result<Path> route_via(int src_nic, int dst_nic, std::span<const int> switches) const;

  // Next hops from switch `sw` toward switch `dst` on shortest paths, as
  // directed links (empty when unreachable).
  std::vector<int> next_hops(int sw, int dst);

  // Switch-to-switch hop count, -1 if unreachable.
  int distance(int from_sw, int to_sw);

  const topo::Fabric& fabric() const { return f_; }

 private:
  const std::vector<int16_t>& dist_to(int dst_sw);

  const topo::Fabric& f_;
  std::vector<std::vector<int16_t>> dist_;  // dist_[dst][sw], built lazily
};

// OK when the NIC's access link (NIC - its switch) is up, else unavailable
// naming the NIC and the switch: no source port avoids that link, so a plan
// that needs it cannot be made.
Status check_access_link(const topo::Fabric& f, int nic);

// Switches visited by a path, in order.
std::vector<int> path_switches(const topo::Fabric& f, const Path& p);

}  // namespace weft::routing
