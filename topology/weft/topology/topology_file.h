// The topology file: one JSON document, documented in docs/topology-format.md.
//
//   {"version": 1, "name": "...", "kind": "clos2|clos3|bigraph|custom",
//    "switches": [{"name": "s1", "tier": 1, "id": 1}, ...],
//    "hosts": [{"name": "h1-1", "nics": [{"name": "eth0", "switch": "l1",
//               "gbps": 100, "gpus": [0], "address": "10.0.1.1"}]}],
//    "links": [{"a": "s1", "b": "l1", "gbps": 100, "state": "up"}]}
//
// NIC access links are implied by "switch" (and "gbps"/"state") on the NIC;
// "links" lists switch-to-switch links. Loading reports the JSON path of a bad
// field ("/hosts/3/nics/0/switch: unknown switch 'l9'") or the line and column
// of a syntax error.
#pragma once

#include <string>

#include "weft/topology/fabric.h"

namespace weft::topo {

Result<Fabric> parse_topology(const std::string& text);
Result<Fabric> load_topology(const std::string& path);
// The normalised form: every field present, in a stable order. `weft topo show
// --json` prints this; it loads back to an equal fabric.
std::string topology_to_json(const Fabric& f, int indent = 2);
Status save_topology(const Fabric& f, const std::string& path);

}  // namespace weft::topo
