// The fabric a probe campaign found, as a topology weft rank / route / check
// read (topology/fabric.h): what `weft topo infer` writes and `weft demo`
// ranks and routes on, so that the whole pipeline runs on measured structure
// rather than on a file someone wrote by hand.
//
//   auto db = db::Database::open("fabric.db").value();
//   topo::Fabric f = probe::inferred_topology(db, {}).value();   // newest campaign
//   topo::save_topology(f, "fabric.json");
//
// Mapping (inference.h has how leaves, spines and dead links are found):
//   hosts     one per host of the campaign, named as in the hosts file, one
//             NIC "eth0" whose address is the probed IP; when every name is
//             "host:nic" (each NIC of a multi-NIC host probed at its own
//             address), NIC nic of host, in hosts-file order;
//   planes    the connected parts of the spine-leaf graph over links some
//             flow crossed, when there are several (inferred_shape.h); then
//             every switch gets its plane and no link joins two planes;
//   rails     kind "rail" when every host has G >= 2 NICs on each plane and
//             each leaf holds only the g-th of its hosts' NICs: rail g;
//   leaves    l<N> for inferred leaf N (tier 0), hosts attached by inference;
//   spines    s<N> for spine number N (tier 1, probe id N: the DSCP rewrite
//             X -> X+N, or the N-th ICMP source of a TTL campaign), which is
//             how the measured path table (db_path_table.h) finds them;
//   links     every spine - leaf pair of a 2-tier Clos (of one plane); a link no flow
//             crossed is "down" (named dead by the inference, or never seen:
//             a targeted campaign that did not cover it cannot vouch for it).
// Link speeds are not measurable by probes: they come from the options.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "weft/db/database.h"
#include "weft/topology/fabric.h"

namespace weft::probe {

struct InferredTopologyOptions {
  std::optional<int64_t> campaign;  // default: the newest finished campaign
  double fabric_gbps = 100;         // spine - leaf links
  double access_gbps = 100;         // host - leaf links
  std::string name;                 // default: "probed-<db campaign id>"
};

Result<topo::Fabric> inferred_topology(db::Database& db, const InferredTopologyOptions& opt);

}  // namespace weft::probe
