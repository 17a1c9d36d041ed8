// planes.h: the planes of an inferred fabric.
#include "planes.h"

#include <algorithm>
#include <set>

#include "union_find.h"

namespace weft::probe {
namespace {

// The plane of an untouched leaf from its hosts' NICs on placed leaves
// (planes.h): the plane its hosts are most short of, or -1 when they are
// short of none or the campaign gives no evidence.
int place_by_hosts(int l, const std::vector<int>& plane_of_leaf, int planes,
                   const std::vector<std::pair<std::string, int>>& nics) {
  std::map<std::string, std::vector<int>> per_plane;  // host -> NICs on placed leaves, per plane
  std::set<std::string> on_leaf;
  for (const auto& [host, leaf] : nics) {
    auto& count = per_plane[host];
    count.resize(static_cast<size_t>(planes), 0);
    if (leaf == l) on_leaf.insert(host);
    const int p = plane_of_leaf[static_cast<size_t>(leaf)];
    if (p >= 0) ++count[static_cast<size_t>(p)];
  }
  std::vector<int> short_of(static_cast<size_t>(planes), 0);
  for (const auto& host : on_leaf) {
    const auto& count = per_plane[host];
    const int most = *std::max_element(count.begin(), count.end());
    for (int p = 0; p < planes; ++p) short_of[static_cast<size_t>(p)] += most - count[static_cast<size_t>(p)];
  }
  int best = -1;
  for (int p = 0; p < planes; ++p) {
    const int n = short_of[static_cast<size_t>(p)];
    if (n > 0 && (best < 0 || n > short_of[static_cast<size_t>(best)])) best = p;
  }
  return best;
}

}  // namespace

Planes infer_planes(const db::InferredFabric& inf, int leaves, const std::vector<std::pair<std::string, int>>& nics) {
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
  for (const auto& [number, v] : spine_vertex) {
    if (!touched[v]) return out;
  }
  // Planes of the touched leaves, then each untouched leaf placed in turn.
  std::map<size_t, int> plane_of_root;
  std::vector<int> plane(static_cast<size_t>(leaves) + 1, -1);
  for (int l = 1; l <= leaves; ++l) {
    if (!touched[static_cast<size_t>(l)]) continue;
    const auto [it, fresh] = plane_of_root.try_emplace(parts.find(static_cast<size_t>(l)),
                                                       static_cast<int>(plane_of_root.size()));
    plane[static_cast<size_t>(l)] = it->second;
  }
  const int planes = static_cast<int>(plane_of_root.size());
  for (int l = 1; l <= leaves; ++l) {
    if (touched[static_cast<size_t>(l)]) continue;
    const int p = planes > 0 ? place_by_hosts(l, plane, planes, nics) : -1;
    if (p < 0) return out;
    plane[static_cast<size_t>(l)] = p;
  }
  if (planes < 2) return out;
  // Number the planes by their lowest leaf.
  std::vector<int> renumber(static_cast<size_t>(planes), -1);
  int next = 0;
  for (int l = 1; l <= leaves; ++l) {
    int& r = renumber[static_cast<size_t>(plane[static_cast<size_t>(l)])];
    if (r < 0) r = next++;
  }
  out.leaf.assign(static_cast<size_t>(leaves) + 1, -1);
  for (int l = 1; l <= leaves; ++l) out.leaf[static_cast<size_t>(l)] = renumber[static_cast<size_t>(plane[static_cast<size_t>(l)])];
  for (const auto& [number, v] : spine_vertex) out.spine[number] = renumber[static_cast<size_t>(plane_of_root.at(parts.find(v)))];
  return out;
}

}  // namespace weft::probe
