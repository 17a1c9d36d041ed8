// inferred_shape.h: rails and planes from a probe campaign's inference.
#include "inferred_shape.h"

#include <set>
#include <utility>

#include "planes.h"
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

int plane_of(const FabricShape& shape, int leaf) {
  return shape.leaf_plane.empty() ? 0 : shape.leaf_plane[static_cast<size_t>(leaf)];
}

}  // namespace

FabricShape infer_shape(const db::InferredFabric& inf, const std::vector<Endpoint>& ends, int leaves) {
  FabricShape shape;
  std::vector<std::pair<std::string, int>> nics;  // (host, leaf) per NIC (split_nic_names)
  for (const auto& e : ends) nics.emplace_back(e.host, e.leaf);
  Planes planes = infer_planes(inf, leaves, nics);
  shape.leaf_plane = std::move(planes.leaf);
  shape.spine_plane = std::move(planes.spine);
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
