// A path table read from an emulated fabric's forwarding tables: for each
// pair of NICs, `ports` source ports of the planner's range and the spine
// the kernel forwards each TCP 5-tuple through (netns-fabric.sh `routes`,
// `ip route get` on the source leaf with the fabric's hash seed). What a
// probe campaign measures packet by packet, asked of the FIB directly: the
// rail demo plans on it because its hosts have a NIC port per rank and no
// agents (demo_rail.h), and the linux-l4 hash model does not reproduce the
// kernel's choice on every multipath route.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "emulated_fabric.h"
#include "weft/routing/path_table.h"

namespace weft::cli::demo {

struct FibQuery {
  int src_nic = -1, dst_nic = -1;  // NICs of `f`, whose "host:nic" names the fabric's hosts carry
  uint16_t dport = 0;
};

// Asks the fabric about `queries`, `ports` source ports each (spread over
// the planner's default range), in one batch; pairs asked for later are
// looked up then.
Result<std::unique_ptr<routing::PathTable>> make_fib_path_table(const topo::Fabric& f, EmulatedFabric& fabric,
                                                                const std::vector<FibQuery>& queries, int ports);

}  // namespace weft::cli::demo
