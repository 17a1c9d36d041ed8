// Topology inference (inference.h).
#include "weft/probe/inference.h"

#include <arpa/inet.h>

#include <set>

#include <fmt/format.h>

#include "planes.h"
#include "union_find.h"
#include "weft/common/ipv4.h"

namespace weft::probe {
std::map<int, std::string> number_ttl_spines(std::vector<db::Observation>& obs) {
  std::map<uint32_t, std::string> by_ip;
  for (const auto& o : obs) {
    if (o.hop_addr) by_ip[ipv4_or_zero(*o.hop_addr)] = *o.hop_addr;
  }
  std::map<std::string, int> number;
  std::map<int, std::string> out;
  int n = 0;
  for (const auto& [ip, s] : by_ip) {
    number[s] = ++n;
    out[n] = s;
  }
  for (auto& o : obs) {
    if (o.answered == 0) continue;
    o.spine = o.hop_addr ? number[*o.hop_addr] : 0;
  }
  return out;
}

std::string_view nic_host(std::string_view name) {
  const auto colon = name.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == name.size() ||
      name.find(':', colon + 1) != std::string_view::npos) {
    return {};
  }
  return name.substr(0, colon);
}

Inference infer_fabric(const std::vector<db::HostRow>& hosts, const std::vector<db::Observation>& obs,
                       const std::map<int, std::string>& spine_address) {
  Inference inf;
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < hosts.size(); ++i) index[hosts[i].id] = i;
  // Observations between two hosts of this list that are not NICs of one host.
  auto in_fabric = [&](const db::Observation& o) {
    auto s = index.find(o.src_id), d = index.find(o.dst_id);
    if (s == index.end() || d == index.end()) return false;
    const std::string_view host = nic_host(hosts[s->second].name);
    return host.empty() || host != nic_host(hosts[d->second].name);
  };
  UnionFind uf(hosts.size());
  for (const auto& o : obs) {
    if (o.answered > 0 && o.spine == 0 && !o.unstable && in_fabric(o)) {
      uf.join(index[o.src_id], index[o.dst_id]);
    }
  }
  std::map<size_t, int> leaf_of_root;
  std::vector<int> leaf(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    const size_t r = uf.find(i);
    if (!leaf_of_root.count(r)) leaf_of_root[r] = static_cast<int>(leaf_of_root.size()) + 1;
    leaf[i] = leaf_of_root[r];
    inf.fabric.host_leaf[hosts[i].id] = leaf[i];
  }
  inf.leaves = static_cast<int>(leaf_of_root.size());

  std::set<int> spines;
  std::map<std::pair<int, int>, int64_t> flows;  // (spine, leaf) -> flows
  std::map<int, int64_t> leaf_cross;              // leaf -> cross-leaf flows seen
  std::map<std::pair<int64_t, int64_t>, int> answered_ports;
  for (const auto& o : obs) {
    if (!in_fabric(o)) continue;
    answered_ports[{o.src_id, o.dst_id}] += o.answered > 0 ? 1 : 0;
    if (o.unstable) {
      inf.anomalies.push_back({"unstable", fmt::format("{} -> {} {} sport {} dport {}: spines {} and {}",
                                                       hosts[index[o.src_id]].name, hosts[index[o.dst_id]].name,
                                                       o.protocol == 6 ? "tcp" : "udp", o.sport, o.dport,
                                                       o.spine.value_or(-1), o.other_spine.value_or(-1))});
    }
    if (o.answered == 0 || !o.spine || *o.spine <= 0) continue;
    const int s = *o.spine;
    spines.insert(s);
    for (int l : {leaf[index[o.src_id]], leaf[index[o.dst_id]]}) {
      ++flows[{s, l}];
      ++leaf_cross[l];
    }
    if (o.unstable && o.other_spine && *o.other_spine > 0) spines.insert(*o.other_spine);
  }
  for (int s : spines) {
    auto a = spine_address.find(s);
    inf.fabric.spines.push_back({s, a == spine_address.end() ? "" : a->second});
  }
  // Planes (planes.h) share no link: a spine and a leaf of two planes are no
  // link, let alone a dead one, and hosts of two planes never reach each other.
  db::InferredFabric carried;
  carried.spines = inf.fabric.spines;
  for (const auto& [key, n] : flows) carried.links.push_back({key.first, key.second, n, false});
  std::vector<std::pair<std::string, int>> nics;  // (host, leaf) per NIC: empty unless every name is "host:nic"
  for (size_t i = 0; i < hosts.size(); ++i) {
    const std::string_view host = nic_host(hosts[i].name);
    if (host.empty()) {
      nics.clear();
      break;
    }
    nics.emplace_back(std::string(host), leaf[i]);
  }
  const Planes planes = infer_planes(carried, inf.leaves, nics);
  auto same_plane = [&](int leaf_a, int leaf_b) {
    return !planes.several() || planes.leaf[static_cast<size_t>(leaf_a)] == planes.leaf[static_cast<size_t>(leaf_b)];
  };
  for (int s : spines) {
    for (int l = 1; l <= inf.leaves; ++l) {
      if (planes.several() && planes.spine.at(s) != planes.leaf[static_cast<size_t>(l)]) continue;
      const int64_t n = flows.count({s, l}) ? flows[{s, l}] : 0;
      // Only a leaf that sent or received cross-leaf traffic can show a dead link.
      const bool dead = n == 0 && leaf_cross[l] > 0;
      if (n > 0 || dead) inf.fabric.links.push_back({s, l, n, dead});
      if (dead) inf.anomalies.push_back({"dead_link", fmt::format("spine {} - leaf {}: no flow crossed it", s, l)});
    }
  }
  for (const auto& [pair, n] : answered_ports) {
    if (n == 0 && same_plane(leaf[index[pair.first]], leaf[index[pair.second]])) {
      inf.anomalies.push_back({"unreachable", fmt::format("{} -> {}: no probe answered on any port",
                                                          hosts[index[pair.first]].name, hosts[index[pair.second]].name)});
    }
  }
  return inf;
}

}  // namespace weft::probe
