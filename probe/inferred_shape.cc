// inferred_shape.h: rails and planes from a probe campaign's inference.
#include "inferred_shape.h"

#include <numeric>
#include <set>

#include "weft/probe/inference.h"

namespace weft::probe {

void split_nic_names(std::vector<Endpoint>& ends) {
  for (const auto& e : ends) {
    if (nic_host(e.host).empty()) return;
  }
  for (auto& e : ends) {
    const auto colon = e.host.find(':');
    e.nic = e.host.substr(colon + 1);
    e.host.resize(colon);
  }
}

namespace {

// Union-find over vertices: leaves 1..L, then spines in number order.
struct Parts {
  std::vector<int> up;
  explicit Parts(size_t n) : up(n) { std::iota(up.begin(), up.end(), 0); }
  int find(int v) {
    while (up[static_cast<size_t>(v)] != v) v = up[static_cast<size_t>(v)] = up[static_cast<size_t>(up[static_cast<size_t>(v)])];
    return v;
  }
  void join(int a, int b) { up[static_cast<size_t>(find(a))] = find(b); }
};

// Planes as connected parts; empty when there is one, or when some switch
// carried nothing (its plane cannot be told: keep today's single plane).
void infer_planes(const db::InferredFabric& inf, int leaves, FabricShape& shape) {
  std::map<int, int> spine_vertex;
  for (const auto& s : inf.spines) spine_vertex.emplace(s.number, leaves + 1 + static_cast<int>(spine_vertex.size()));
  Parts parts(static_cast<size_t>(leaves + 1) + spine_vertex.size());
  std::vector<char> touched(parts.up.size(), 0);
  for (const auto& k : inf.links) {
    auto sv = spine_vertex.find(k.spine);
    if (k.dead || k.flows <= 0 || sv == spine_vertex.end() || k.leaf < 1 || k.leaf > leaves) continue;
    parts.join(k.leaf, sv->second);
    touched[static_cast<size_t>(k.leaf)] = touched[static_cast<size_t>(sv->second)] = 1;
  }
  for (size_t v = 1; v < touched.size(); ++v) {
    if (!touched[v]) return;
  }
  std::map<int, int> plane_of_root;  // numbered by their lowest leaf
  for (int l = 1; l <= leaves; ++l) plane_of_root.try_emplace(parts.find(l), static_cast<int>(plane_of_root.size()));
  if (plane_of_root.size() < 2) return;
  shape.leaf_plane.assign(static_cast<size_t>(leaves + 1), -1);
  for (int l = 1; l <= leaves; ++l) shape.leaf_plane[static_cast<size_t>(l)] = plane_of_root.at(parts.find(l));
  for (const auto& [number, v] : spine_vertex) shape.spine_plane[number] = plane_of_root.at(parts.find(v));
}

int plane_of(const FabricShape& shape, int leaf) {
  return shape.leaf_plane.empty() ? 0 : shape.leaf_plane[static_cast<size_t>(leaf)];
}

}  // namespace

FabricShape infer_shape(const db::InferredFabric& inf, const std::vector<Endpoint>& ends, int leaves) {
  FabricShape shape;
  infer_planes(inf, leaves, shape);
  // Position of every endpoint among its host's NICs of the same plane.
  std::map<std::pair<std::string, int>, int> count;  // (host, plane) -> NICs so far
  std::vector<std::set<int>> positions(static_cast<size_t>(leaves + 1));
  std::vector<std::set<std::string>> leaf_hosts(static_cast<size_t>(leaves + 1));
  bool rails = true;
  for (const auto& e : ends) {
    const int pos = count[{e.host, plane_of(shape, e.leaf)}]++;
    positions[static_cast<size_t>(e.leaf)].insert(pos);
    rails &= leaf_hosts[static_cast<size_t>(e.leaf)].insert(e.host).second;  // one NIC of a host per leaf
  }
  std::set<int> per_plane;
  for (const auto& [key, n] : count) per_plane.insert(n);
  rails &= per_plane.size() == 1 && *per_plane.begin() >= 2;
  for (int l = 1; l <= leaves && rails; ++l) rails &= positions[static_cast<size_t>(l)].size() == 1;
  if (!rails) return shape;
  shape.rails = true;
  shape.leaf_rail.assign(static_cast<size_t>(leaves + 1), -1);
  for (int l = 1; l <= leaves; ++l) shape.leaf_rail[static_cast<size_t>(l)] = *positions[static_cast<size_t>(l)].begin();
  return shape;
}

}  // namespace weft::probe
