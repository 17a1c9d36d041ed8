// Rails and planes in a probe campaign's inferred fabric (internal to
// inferred_topology.cc; docs/topology-format.md "Rails and planes").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "weft/db/stores.h"

namespace weft::probe {

// One probed address: a NIC of a host, on inferred leaf `leaf` (1-based).
struct Endpoint {
  std::string host;
  std::string nic;
  std::string ip;
  int leaf = 0;
};

// Campaign hosts named "host:nic" become NIC nic of host; applied only when
// every name has that form (otherwise every endpoint is its own host).
void split_nic_names(std::vector<Endpoint>& ends);

struct FabricShape {
  std::map<int, int> spine_plane;  // spine number -> plane (empty: one plane)
  std::vector<int> leaf_plane;     // by leaf number (index 0 unused; empty: one plane)
  bool rails = false;              // a rail fabric: leaf_rail holds every leaf's rail
  std::vector<int> leaf_rail;      // by leaf number
};

// Planes are the connected parts of the spine-leaf graph over links that
// carried a flow, when there are several and each has spines and leaves. It
// is a rail fabric when every host has G >= 2 NICs in each plane and every
// leaf holds only the g-th NIC (in hosts-file order within the plane) of
// its hosts: that leaf is then on rail g.
FabricShape infer_shape(const db::InferredFabric& inf, const std::vector<Endpoint>& ends, int leaves);

}  // namespace weft::probe
