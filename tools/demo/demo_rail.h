// `weft demo --fabric rail`: hybrid AllReduce on a rail-optimised
// multi-plane fabric of network namespaces (scripts/netns-fabric.sh
// up-rail), one rank per (host, NIC port), ranks of a host contiguous (the
// `rail` rank order), each rank listening on its own port's address and
// naming its host (CommConfig::host) so that hybrid groups the ranks of a
// host. Per trial (a new fabric hash seed each): (a) ephemeral ports, ECMP
// picks the spines; (b) the plan `weft route --collective allreduce-hybrid`
// makes, every result verified element by element.
//
// The plan is made as `weft route --collective allreduce-hybrid` makes it
// (the same planner, checker and simulator), on a path table read from the
// fabric's forwarding tables (fib_path_table.h: `ip route get` of each
// candidate 5-tuple on its source leaf), not on the linux-l4 hash model,
// which sent 5 of 16 planned spine-crossing flows through another spine than this
// kernel does, nor on a probe campaign, which would need an agent per NIC
// port (tests/integration/rail_fabric_netns_test.cc runs one).
#pragma once

#include <string>
#include <vector>

#include "demo_config.h"
#include "weft/common/status.h"

namespace weft::cli::demo {

// One message naming the spine-leaf demo's flags in `given` (as typed,
// e.g. "--leaves") that a rail fabric has no use for; ok when none.
Status check_rail_flags(const std::vector<std::string>& given);

Status run_rail(const DemoConfig& cfg, const std::string& weft, const std::string& dir, bool own_dir);

}  // namespace weft::cli::demo
