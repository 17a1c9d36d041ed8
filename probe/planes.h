// The planes of an inferred fabric (internal to the inference: inference.cc
// judges links and pairs by them, inferred_shape.cc writes them).
#pragma once

#include <map>
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
// leaf, when there are several. One plane (empty) when some leaf 1..leaves
// or spine of `inf` carried nothing: its plane cannot be told, and a leaf cut
// off by failed links must read as a failure, not as a plane.
Planes infer_planes(const db::InferredFabric& inf, int leaves);

}  // namespace weft::probe
