#include "weft/routing/paths.h"

#include <deque>

#include <fmt/format.h>

namespace weft::routing {

PathFinder::PathFinder(const topo::Fabric& f) : f_(f), dist_(f.switches.size()) {}

const std::vector<int16_t>& PathFinder::dist_to(int dst) {
  auto& d = dist_[dst];
  if (!d.empty()) return d;
  // BFS over up links from the destination switch.
  d.assign(f_.switches.size(), -1);
  std::deque<int> q{dst};
  d[dst] = 0;
  while (!q.empty()) {
    int u = q.front();
    q.pop_front();
    for (const auto& a : f_.switch_neighbours(u)) {
      if (f_.links[a.link].state != topo::LinkState::kUp || d[a.sw] >= 0) continue;
      d[a.sw] = static_cast<int16_t>(d[u] + 1);
      q.push_back(a.sw);
    }
  }
  return d;
}

int PathFinder::distance(int from_sw, int to_sw) { return dist_to(to_sw)[from_sw]; }

std::vector<int> PathFinder::next_hops(int sw, int dst) {
  std::vector<int> out;
  const auto& d = dist_to(dst);
  if (d[sw] <= 0) return out;
  // Direct link first: on Clos spines and BiGraph cross-part hops the target
  // is a neighbour, and the lookup avoids scanning hundreds of ports.
  if (d[sw] == 1) {
    if (auto l = f_.link_between(f_.switch_vertex(sw), f_.switch_vertex(dst))) {
      if (f_.links[*l].state == topo::LinkState::kUp) out.push_back(f_.directed_from(*l, f_.switch_vertex(sw)));
    }
    return out;
  }
  for (const auto& a : f_.switch_neighbours(sw)) {
    if (f_.links[a.link].state != topo::LinkState::kUp) continue;
    if (d[a.sw] == d[sw] - 1) out.push_back(f_.directed_from(a.link, f_.switch_vertex(sw)));
  }
  return out;
}

Result<Path> PathFinder::route(int src_nic, int dst_nic, const Chooser& choose) {
  if (src_nic == dst_nic) return invalid_argument(fmt::format("flow from {} to itself", f_.nic_qualified_name(src_nic)));
  Path p;
  for (int nic : {src_nic, dst_nic}) {
    if (auto st = check_access_link(f_, nic); !st) {
      return st.with_context(
          fmt::format("no path {} -> {}", f_.nic_qualified_name(src_nic), f_.nic_qualified_name(dst_nic)));
    }
  }
  p.dlinks.push_back(f_.directed_from(f_.nic_link(src_nic), f_.nic_vertex(src_nic)));
  int sw = f_.nic_switch(src_nic);
  const int dst_sw = f_.nic_switch(dst_nic);
  if (dist_to(dst_sw)[sw] < 0) {
    return unavailable(fmt::format("no path {} -> {}: '{}' cannot reach '{}' over links that are up",
                                   f_.nic_qualified_name(src_nic), f_.nic_qualified_name(dst_nic),
                                   f_.switches[sw].name, f_.switches[dst_sw].name));
  }
  while (sw != dst_sw) {
    auto hops = next_hops(sw, dst_sw);
    size_t pick = hops.size() == 1 ? 0 : choose(sw, hops);
    if (pick >= hops.size()) return internal_error("chooser picked a next hop out of range");
    p.dlinks.push_back(hops[pick]);
    sw = f_.vertex_switch(f_.directed_dst(hops[pick]));
  }
  p.dlinks.push_back(f_.directed_from(f_.nic_link(dst_nic), f_.switch_vertex(dst_sw)));
  return p;
}

Result<Path> PathFinder::route_via(int src_nic, int dst_nic, std::span<const int> switches) const {
  if (switches.empty()) return invalid_argument("empty switch path");
  auto name = [&](int n) { return f_.nic_qualified_name(n); };
  if (switches.front() != f_.nic_switch(src_nic) || switches.back() != f_.nic_switch(dst_nic)) {
    return invalid_argument(fmt::format("path for {} -> {} must start at '{}' and end at '{}'", name(src_nic),
                                        name(dst_nic), f_.switches[f_.nic_switch(src_nic)].name,
                                        f_.switches[f_.nic_switch(dst_nic)].name));
  }
  for (int nic : {src_nic, dst_nic}) {
    if (auto st = check_access_link(f_, nic); !st) {
      return st.with_context(fmt::format("path for {} -> {}", name(src_nic), name(dst_nic)));
    }
  }
  Path p;
  p.dlinks.push_back(f_.directed_from(f_.nic_link(src_nic), f_.nic_vertex(src_nic)));
  for (size_t i = 0; i + 1 < switches.size(); ++i) {
    int va = f_.switch_vertex(switches[i]), vb = f_.switch_vertex(switches[i + 1]);
    auto l = f_.link_between(va, vb);
    if (!l) {
      return invalid_argument(fmt::format("path for {} -> {}: no link between '{}' and '{}'", name(src_nic),
                                          name(dst_nic), f_.switches[switches[i]].name,
                                          f_.switches[switches[i + 1]].name));
    }
    if (f_.links[*l].state != topo::LinkState::kUp) {
      return unavailable(fmt::format("path for {} -> {}: link '{}' - '{}' is down", name(src_nic), name(dst_nic),
                                     f_.switches[switches[i]].name, f_.switches[switches[i + 1]].name));
    }
    p.dlinks.push_back(f_.directed_from(*l, va));
  }
  p.dlinks.push_back(f_.directed_from(f_.nic_link(dst_nic), f_.switch_vertex(switches.back())));
  return p;
}

Status check_access_link(const topo::Fabric& f, int nic) {
  if (f.links[static_cast<size_t>(f.nic_link(nic))].state == topo::LinkState::kUp) return ok_status();
  return unavailable(fmt::format("{}'s link to '{}' is down", f.nic_qualified_name(nic),
                                 f.switches[static_cast<size_t>(f.nic_switch(nic))].name));
}

std::vector<int> path_switches(const topo::Fabric& f, const Path& p) {
  std::vector<int> out;
  for (size_t i = 0; i + 1 < p.dlinks.size(); ++i) out.push_back(f.vertex_switch(f.directed_dst(p.dlinks[i])));
  return out;
}

}  // namespace weft::routing
