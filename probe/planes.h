// The planes of an inferred fabric (internal to the inference: inference.cc
// judges links and pairs by them, inferred_shape.cc writes them).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "weft/db/stores.h"

namespace weft::probe {

struct Planes {
  std::vector<int> leaf;      // by leaf number (index 0 unused); empty: one plane
  std::map<int, int> spine;   // spine number -> plane; empty: one plane
  bool several() const { return !leaf.empty(); }
};

// Planes are the connected parts of the spine-leaf graph over the links of
// `inf` that carried a flow (not dead, flows > 0), numbered by their lowest
// leaf, when there are several.
//
// A leaf that carried nothing (a switch down, or every uplink cut) is placed
// by its hosts' other NICs, given as (host, leaf) per NIC in `nics` (empty
// when the campaign does not name NICs "host:nic"): in a multi-plane fabric
// every host has equally many NICs per plane, so the leaf joins the plane its
// hosts are most short of. Otherwise (no such evidence, no spine at all, or
// a spine that carried nothing) the fabric is one plane: a leaf cut off by
// failed links must read as a failure, not as a plane (a rail fabric whose
// spines are all down looks like dual-ToR planes without spines).
Planes infer_planes(const db::InferredFabric& inf, int leaves,
                    const std::vector<std::pair<std::string, int>>& nics = {});

}  // namespace weft::probe
