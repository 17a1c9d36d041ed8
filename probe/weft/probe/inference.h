// Topology inference from one campaign's observations (issue 4, "Topology
// inference"):
//   leaves  — hosts joined by any 5-tuple that crossed no spine (spine 0) share a
//             leaf (union-find); leaves are numbered in the order of their first
//             host in the host list;
//   spines  — every spine number some 5-tuple crossed;
//   links   — spine s – leaf l carries the flows of s from or to a host of l; a
//             link no flow crossed while the spine and the leaf both carried
//             other flows is named dead ("spine 3 – leaf 7: no flow crossed it").
// Unstable 5-tuples and host pairs that never answered become anomalies.
// On a multi-plane fabric (planes.h: the parts of the spine-leaf graph that
// share no link that carried a flow) a spine and a leaf of two planes are not
// a link and hosts of two planes cannot reach each other: neither is named.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "weft/db/stores.h"

namespace weft::probe {

struct Inference {
  db::InferredFabric fabric;
  std::vector<db::Anomaly> anomalies;
  int leaves = 0;
};

// The host of a per-NIC campaign name "host:nic" (one NIC of a multi-NIC
// host probed at its own address, inferred_topology.h); "" for other names.
std::string_view nic_host(std::string_view name);

// hosts: every host of the campaign in list order (id, name). Flows between
// two NICs of one host ("h:a" -> "h:b") are left out: the kernel delivers to
// a local address without sending, so they never enter the fabric.
Inference infer_fabric(const std::vector<db::HostRow>& hosts, const std::vector<db::Observation>& obs,
                       const std::map<int, std::string>& spine_address = {});

// TTL method: number the distinct ICMP source addresses 1..S in numeric order
// and set each answered observation's spine (0 = reached the destination).
// Returns number -> address.
std::map<int, std::string> number_ttl_spines(std::vector<db::Observation>& obs);

}  // namespace weft::probe
