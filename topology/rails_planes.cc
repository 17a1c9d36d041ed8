// The rules of rails and planes (docs/topology-format.md "Rails and planes").
//
// Planes are disjoint networks (Alibaba HPN, SIGCOMM 2024, §5 dual-plane;
// DeepSeek-V3, ISCA 2025, multi-plane fat tree): a flow can only stay on the
// plane it starts on, so a switch or link shared by two planes would make
// the planes one network and every per-plane claim void. A rail fabric puts
// NIC g of every host on rail g (NVIDIA DGX SuperPOD reference architecture):
// rail-aligned steps (local rank g with local rank g of other hosts) then
// stay under rail g's leaves, which only holds if every host has exactly one
// NIC on every rail of every plane.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "weft/topology/fabric.h"

namespace weft::topo {
namespace {

// Values 0..max+1 must all occur: "plane 2" without a plane 1 is a typo.
Status check_numbered(const std::vector<Switch>& sws, int Switch::* field, std::string_view what) {
  std::set<int> seen;
  for (const auto& s : sws) {
    if (s.*field >= 0) seen.insert(s.*field);
  }
  int expect = 0;
  for (int v : seen) {
    if (v != expect) {
      return invalid_argument(fmt::format("no switch is on {} {} but one is on {} {}: number {}s 0, 1, 2, ...", what,
                                          expect, what, v, what));
    }
    ++expect;
  }
  return ok_status();
}

}  // namespace

Status Fabric::check_rails_planes() {
  num_rails_ = 0;
  num_planes_ = 0;
  bool any_plane = false;
  for (const auto& s : switches) {
    if (s.rail < -1) return invalid_argument(fmt::format("switch '{}': rail {} must be >= 0", s.name, s.rail));
    if (s.plane < -1) return invalid_argument(fmt::format("switch '{}': plane {} must be >= 0", s.name, s.plane));
    if (s.rail >= 0 && s.tier != kTierLeaf) {
      return invalid_argument(
          fmt::format("switch '{}' (tier {}) has rail {}: only leaves (tier 0) belong to a rail", s.name, s.tier, s.rail));
    }
    if (s.rail >= 0 && kind != FabricKind::kRail) {
      return invalid_argument(fmt::format("switch '{}' has rail {} but the fabric's kind is '{}': rails need kind 'rail'",
                                          s.name, s.rail, fabric_kind_name(kind)));
    }
    if (kind == FabricKind::kRail && s.tier == kTierLeaf && s.rail < 0) {
      return invalid_argument(fmt::format("leaf '{}' has no rail: every leaf of a rail fabric belongs to one rail", s.name));
    }
    any_plane |= s.plane >= 0;
    num_rails_ = std::max(num_rails_, s.rail + 1);
    num_planes_ = std::max(num_planes_, s.plane + 1);
  }
  WEFT_RETURN_IF_ERROR(check_numbered(switches, &Switch::rail, "rail"));
  WEFT_RETURN_IF_ERROR(check_numbered(switches, &Switch::plane, "plane"));
  if (any_plane) {
    for (size_t s = 0; s < switches.size(); ++s) {
      if (switches[s].plane < 0) {
        return invalid_argument(fmt::format(
            "switch '{}' has no plane: every switch of a multi-plane fabric belongs to exactly one plane", switches[s].name));
      }
    }
  }
  link_rail_.assign(links.size(), -1);
  link_plane_.assign(links.size(), -1);
  for (size_t l = 0; l < links.size(); ++l) {
    const Link& lk = links[l];
    const Switch* ends[2] = {is_switch_vertex(lk.a) ? &switches[vertex_switch(lk.a)] : nullptr,
                             is_switch_vertex(lk.b) ? &switches[vertex_switch(lk.b)] : nullptr};
    if (ends[0] && ends[1] && ends[0]->plane != ends[1]->plane) {
      return invalid_argument(fmt::format("link {} - {} joins plane {} and plane {}: planes share no switch and no link",
                                          ends[0]->name, ends[1]->name, ends[0]->plane, ends[1]->plane));
    }
    for (const Switch* e : ends) {
      if (!e) continue;
      link_plane_[l] = e->plane;
      if (e->rail >= 0) link_rail_[l] = e->rail;
    }
  }
  // Every host reaches every plane, and in a rail fabric every rail of it,
  // with exactly one NIC: a host missing one cannot take part in that
  // plane's (rail's) share of a collective.
  const int planes = std::max(1, num_planes_), rails = std::max(1, num_rails_);
  std::vector<std::set<int>> plane_rails(static_cast<size_t>(planes));
  for (const auto& s : switches) {
    if (s.rail >= 0) plane_rails[static_cast<size_t>(std::max(0, s.plane))].insert(s.rail);
  }
  auto of_plane = [&](int p) { return num_planes_ > 0 ? fmt::format(" of plane {}", p) : std::string(); };
  std::vector<int> owner;  // by plane * rails + rail: the host's NIC there, -1 none
  for (const auto& h : hosts) {
    owner.assign(static_cast<size_t>(planes * rails), -1);
    for (int n : h.nics) {
      const int p = std::max(0, nic_plane(n)), r = std::max(0, nic_rail(n));
      int& o = owner[static_cast<size_t>(p * rails + r)];
      if (o >= 0 && kind == FabricKind::kRail) {
        return invalid_argument(fmt::format("host '{}' has two NICs on rail {}{}: {} and {}", h.name, r, of_plane(p),
                                            nic_qualified_name(o), nic_qualified_name(n)));
      }
      o = n;
    }
    for (int p = 0; p < planes; ++p) {
      const auto first = owner.begin() + p * rails;
      if (num_planes_ > 0 && std::all_of(first, first + rails, [](int o) { return o < 0; })) {
        return invalid_argument(fmt::format("host '{}' has no NIC on plane {}: port k of every NIC sits on plane k", h.name, p));
      }
      for (int r : plane_rails[static_cast<size_t>(p)]) {
        if (owner[static_cast<size_t>(p * rails + r)] < 0) {
          return invalid_argument(fmt::format("host '{}' has no NIC on rail {}{}: a rail fabric puts NIC g of every host on rail g",
                                              h.name, r, of_plane(p)));
        }
      }
    }
  }
  return ok_status();
}

}  // namespace weft::topo
