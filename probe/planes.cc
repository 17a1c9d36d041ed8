// planes.h: the planes of an inferred fabric.
#include "planes.h"

#include "union_find.h"

namespace weft::probe {

Planes infer_planes(const db::InferredFabric& inf, int leaves) {
  // Vertices: leaves 1..L, then spines in number order.
  std::map<int, size_t> spine_vertex;
  for (const auto& s : inf.spines) spine_vertex.emplace(s.number, static_cast<size_t>(leaves) + 1 + spine_vertex.size());
  UnionFind parts(static_cast<size_t>(leaves) + 1 + spine_vertex.size());
  std::vector<char> touched(parts.parent.size(), 0);
  for (const auto& k : inf.links) {
    auto sv = spine_vertex.find(k.spine);
    if (k.dead || k.flows <= 0 || sv == spine_vertex.end() || k.leaf < 1 || k.leaf > leaves) continue;
    parts.join(static_cast<size_t>(k.leaf), sv->second);
    touched[static_cast<size_t>(k.leaf)] = touched[sv->second] = 1;
  }
  Planes out;
  for (size_t v = 1; v < touched.size(); ++v) {
    if (!touched[v]) return out;
  }
  std::map<size_t, int> plane_of_root;  // numbered by their lowest leaf
  for (int l = 1; l <= leaves; ++l) {
    plane_of_root.try_emplace(parts.find(static_cast<size_t>(l)), static_cast<int>(plane_of_root.size()));
  }
  if (plane_of_root.size() < 2) return out;
  out.leaf.assign(static_cast<size_t>(leaves) + 1, -1);
  for (int l = 1; l <= leaves; ++l) out.leaf[static_cast<size_t>(l)] = plane_of_root.at(parts.find(static_cast<size_t>(l)));
  for (const auto& [number, v] : spine_vertex) out.spine[number] = plane_of_root.at(parts.find(v));
  return out;
}

}  // namespace weft::probe
