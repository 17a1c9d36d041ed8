#include "weft/routing/link_load.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "weft/routing/planes.h"

namespace weft::routing {

namespace {

// Both bounds of step_lower_bound: the access links' (flows of one NIC in one
// direction) and the switch-to-switch links' (the rest).
struct Bounds {
  int access = 0;
  int fabric = 0;
};

Bounds step_bounds(const topo::Fabric& f, const ranking::RankOrder& order, const Step& step) {
  Bounds out;
  if (step.flows.empty()) return out;
  int lb = 0;
  std::vector<int> up(f.switches.size(), 0), down(f.switches.size(), 0);
  std::vector<int> acc_out(f.nics.size(), 0), acc_in(f.nics.size(), 0);
  std::vector<uint64_t> pairs;
  std::map<int, std::pair<int, int>> pod_out_in;  // 3-tier: flows leaving, entering each pod
  for (const auto& fl : step.flows) {
    const auto [s, d] = flow_nics(f, order, fl);
    if (d < 0 || s == d) continue;  // cross-plane (no route) or in-NIC (no link): planes.h
    out.access = std::max({out.access, ++acc_out[s], ++acc_in[d]});
    int ls = f.nic_switch(s), ld = f.nic_switch(d);
    if (ls != ld) {
      ++up[ls];
      ++down[ld];
      pairs.push_back((static_cast<uint64_t>(ls) << 32) | static_cast<uint32_t>(ld));
      const int ps = f.switches[static_cast<size_t>(ls)].pod, pd = f.switches[static_cast<size_t>(ld)].pod;
      if (ps >= 0 && pd >= 0 && ps != pd) {
        ++pod_out_in[ps].first;
        ++pod_out_in[pd].second;
      }
    }
  }
  // A 3-tier pod is a switch of its own to the cores: its flows to other
  // pods leave, and theirs enter, over the links from its aggregation
  // switches up to the cores, ceil(flows / such links that are up) on the
  // busiest (a pod of 32 hosts over 8 agg-core links: 4).
  for (const auto& [pod, flows] : pod_out_in) {
    int uplinks = 0;
    for (size_t sw = 0; sw < f.switches.size(); ++sw) {
      if (f.switches[sw].pod != pod || f.switches[sw].tier == topo::kTierLeaf) continue;
      for (const auto& adj : f.switch_neighbours(static_cast<int>(sw))) {
        uplinks += f.switches[adj.sw].tier > f.switches[sw].tier && f.links[adj.link].state == topo::LinkState::kUp;
      }
    }
    if (uplinks > 0) lb = std::max({lb, (flows.first + uplinks - 1) / uplinks, (flows.second + uplinks - 1) / uplinks});
  }
  // Flows between two switches that share upper neighbours cross one of the
  // upper switches both still reach: ceil(flows / such switches) on the
  // busiest of those uplinks (2-tier Clos with failed links; leaves of one
  // pod). Shortest-path routing cannot detour around it.
  std::sort(pairs.begin(), pairs.end());
  for (size_t i = 0; i < pairs.size();) {
    size_t j = i;
    while (j < pairs.size() && pairs[j] == pairs[i]) ++j;
    const int a = static_cast<int>(pairs[i] >> 32), b = static_cast<int>(pairs[i] & 0xffffffffu);
    int common = 0;
    for (const auto& adj : f.switch_neighbours(a)) {
      if (f.switches[adj.sw].tier <= f.switches[a].tier || f.links[adj.link].state != topo::LinkState::kUp) continue;
      auto l = f.link_between(f.switch_vertex(adj.sw), f.switch_vertex(b));
      common += l && f.links[*l].state == topo::LinkState::kUp;
    }
    if (common > 0) lb = std::max(lb, static_cast<int>((j - i + common - 1) / static_cast<size_t>(common)));
    i = j;
  }
  for (size_t sw = 0; sw < f.switches.size(); ++sw) {
    if (!up[sw] && !down[sw]) continue;
    int uplinks = 0;
    for (const auto& a : f.switch_neighbours(static_cast<int>(sw))) {
      if (f.switches[a.sw].tier > f.switches[sw].tier && f.links[a.link].state == topo::LinkState::kUp) ++uplinks;
    }
    if (uplinks == 0) continue;  // no tier above (BiGraph): no bound from here
    lb = std::max({lb, (up[sw] + uplinks - 1) / uplinks, (down[sw] + uplinks - 1) / uplinks});
  }
  out.fabric = lb;
  return out;
}

}  // namespace

int step_lower_bound(const topo::Fabric& f, const ranking::RankOrder& order, const Step& step) {
  const Bounds b = step_bounds(f, order, step);
  // access >= 1 as soon as one flow needs a link (in-NIC flows need none).
  return std::max(b.access, b.fabric);
}

int step_fabric_lower_bound(const topo::Fabric& f, const ranking::RankOrder& order, const Step& step) {
  return step_bounds(f, order, step).fabric;
}

namespace {

// Moves the flows that have no route (their NICs on different planes, with
// no port of the destination's NIC on the source's plane) out of `st` into a
// copy that only holds the routable ones; counts what it moves, and the
// in-NIC flows (planes.h), which stay: routers give them no path.
const Step& drop_unrouted(const topo::Fabric& f, const ranking::RankOrder& order, const Step& st, size_t si,
                          Step& routable, std::vector<size_t>& kept, StepLoad& sl, LoadReport& rep) {
  kept.clear();
  for (size_t i = 0; i < st.flows.size(); ++i) {
    const auto [s, d] = flow_nics(f, order, st.flows[i]);
    if (d >= 0 && f.nic_rail(s) != f.nic_rail(d)) ++sl.cross_rail_flows;
    if (d >= 0) {
      sl.in_nic_flows += d == s;
      kept.push_back(i);
      continue;
    }
    ++sl.cross_plane_flows;
    const int dn = order.nics[static_cast<size_t>(st.flows[i].dst)];
    if (rep.first_cross_plane.empty()) {
      rep.first_cross_plane = fmt::format("step {} ({} d={}): rank {} on {} (plane {}) -> rank {} on {} (plane {}, "
                                          "whose host has no such NIC on plane {})", si,
                                          st.phase, st.distance, st.flows[i].src, f.nic_qualified_name(s), f.nic_plane(s),
                                          st.flows[i].dst, f.nic_qualified_name(dn), f.nic_plane(dn), f.nic_plane(s));
    }
  }
  if (kept.size() == st.flows.size()) return st;
  routable.phase = st.phase;
  routable.distance = st.distance;
  routable.repeat = st.repeat;
  routable.flows.clear();
  for (size_t i : kept) routable.flows.push_back(st.flows[i]);
  return routable;
}

}  // namespace

Result<LoadReport> check_link_load(const topo::Fabric& f, const ranking::RankOrder& order, const Schedule& s,
                                   Router& router, const CheckOptions& opt) {
  if (order.size() != s.ranks) {
    return invalid_argument(
        fmt::format("the rank order has {} ranks but the schedule is for {}", order.size(), s.ranks));
  }
  WEFT_RETURN_IF_ERROR(ranking::validate_order(f, order));
  LoadReport rep;
  const size_t nd = 2 * f.links.size();
  std::vector<int> load(nd, 0);
  std::vector<uint64_t> bytes(nd, 0);
  std::vector<int> touched, touched_bytes;
  std::vector<Path> paths;
  std::vector<size_t> by_round;  // the step's flows, ordered by round
  Step part;                     // one round's flows, for its lower bound
  Step routable;              // a step without its cross-plane flows
  std::vector<size_t> kept;   // their indices in the schedule's step
  const size_t rails = static_cast<size_t>(f.num_rails()), planes = static_cast<size_t>(f.num_planes());
  // Per link: switch-to-switch (1) or an access link (0). A byte per link
  // stays in cache where f.links, read per hop of every flow, does not.
  std::vector<uint8_t> fabric_link(f.links.size());
  for (size_t l = 0; l < f.links.size(); ++l) {
    fabric_link[l] = f.is_switch_vertex(f.links[l].a) && f.is_switch_vertex(f.links[l].b);
  }
  for (size_t si = 0; si < s.steps.size(); ++si) {
    StepLoad sl;
    sl.rail_max_load.assign(rails, 0);
    sl.plane_max_load.assign(planes, 0);
    const Step& st = drop_unrouted(f, order, s.steps[si], si, routable, kept, sl, rep);
    paths.resize(st.flows.size());  // routers overwrite; reusing keeps the vectors' capacity
    for (auto& p : paths) p.dlinks.clear();
    auto rs = router.route_step(st, static_cast<int>(si), paths);
    if (!rs) return rs.with_context(fmt::format("step {} ({} d={})", si, st.phase, st.distance));
    sl.step = static_cast<int>(si);
    sl.phase = st.phase;
    sl.distance = st.distance;
    sl.repeat = st.repeat;
    sl.flows = static_cast<int>(s.steps[si].flows.size());
    by_round.resize(st.flows.size());
    for (size_t i = 0; i < st.flows.size(); ++i) {
      if (st.flows[i].round < 0) {
        return invalid_argument(fmt::format("step {}: rank {} -> {} has round {}", si, st.flows[i].src,
                                            st.flows[i].dst, st.flows[i].round));
      }
      by_round[i] = i;
      sl.rounds = std::max(sl.rounds, st.flows[i].round + 1);
    }
    if (sl.rounds > 1) {
      std::stable_sort(by_round.begin(), by_round.end(),
                       [&](size_t a, size_t b) { return st.flows[a].round < st.flows[b].round; });
    }
    if (opt.keep_per_link) sl.load.assign(nd, 0);
    touched_bytes.clear();
    // Load counts the flows of one (step, round) on a link at once; bytes
    // add up over the whole step.
    for (size_t b = 0; b < by_round.size();) {
      size_t e = b;
      while (e < by_round.size() && st.flows[by_round[e]].round == st.flows[by_round[b]].round) ++e;
      touched.clear();
      for (size_t k = b; k < e; ++k) {
        const size_t i = by_round[k];
        const Path& p = paths[i];
        if (p.dlinks.empty() && sl.in_nic_flows > 0 && flow_nics(f, order, st.flows[i]).in_nic()) continue;
        if (p.dlinks.size() < 2) return internal_error(fmt::format("router {} returned an empty path", router.name()));
        int fabric_hops = 0;
        for (int dl : p.dlinks) {
          if (dl < 0 || static_cast<size_t>(dl) >= nd) return internal_error("router returned a bad link");
          if (load[dl]++ == 0) touched.push_back(dl);
          if (bytes[dl] == 0) touched_bytes.push_back(dl);
          bytes[dl] += st.flows[i].bytes;
          fabric_hops += fabric_link[static_cast<size_t>(dl) / 2];
        }
        if (fabric_hops >= 1) ++sl.fabric_flows;
        if (fabric_hops >= 2) ++sl.multi_hop_flows;
      }
      for (int dl : touched) {
        if (load[dl] > sl.max_load) {
          sl.max_load = load[dl];
          sl.hottest = dl;
        }
        if (fabric_link[static_cast<size_t>(dl) / 2]) sl.max_fabric_load = std::max(sl.max_fabric_load, load[dl]);
        if (opt.keep_per_link) sl.load[dl] = std::max(sl.load[dl], load[dl]);
        if (const int r = f.link_rail(dl / 2); r >= 0) sl.rail_max_load[static_cast<size_t>(r)] = std::max(sl.rail_max_load[static_cast<size_t>(r)], load[dl]);
        if (const int p = f.link_plane(dl / 2); p >= 0) sl.plane_max_load[static_cast<size_t>(p)] = std::max(sl.plane_max_load[static_cast<size_t>(p)], load[dl]);
      }
      for (int dl : touched) load[dl] = 0;
      if (sl.rounds > 1) {
        part.flows.clear();
        for (size_t k = b; k < e; ++k) part.flows.push_back(st.flows[by_round[k]]);
        const Bounds pb = step_bounds(f, order, part);
        sl.lower_bound = std::max({sl.lower_bound, pb.access, pb.fabric});
        sl.fabric_lower_bound = std::max(sl.fabric_lower_bound, pb.fabric);
      }
      b = e;
    }
    for (int dl : touched_bytes) sl.max_bytes = std::max(sl.max_bytes, bytes[dl]);
    const Bounds sb = step_bounds(f, order, st);  // step_lower_bound and step_fabric_lower_bound at once
    sl.single_round_bound = std::max(sb.access, sb.fabric);
    if (sl.rounds == 1) {
      sl.lower_bound = sl.single_round_bound;
      sl.fabric_lower_bound = sb.fabric;
    }
    if (opt.keep_per_link) sl.bytes = bytes;
    if (opt.keep_paths) {
      if (kept.size() == s.steps[si].flows.size()) {
        sl.paths = paths;
      } else {
        sl.paths.assign(s.steps[si].flows.size(), Path{});
        for (size_t k = 0; k < kept.size(); ++k) sl.paths[kept[k]] = paths[k];
      }
    }
    for (int dl : touched_bytes) bytes[dl] = 0;
    rep.max_load = std::max(rep.max_load, sl.max_load);
    rep.max_lower_bound = std::max(rep.max_lower_bound, sl.lower_bound);
    rep.max_multi_hop = std::max(rep.max_multi_hop, sl.multi_hop_flows);
    rep.max_rounds = std::max(rep.max_rounds, sl.rounds);
    rep.cross_plane_flows += sl.cross_plane_flows;
    rep.steps.push_back(std::move(sl));
  }
  return rep;
}

}  // namespace weft::routing
