#include "weft/routing/simulator.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "weft/routing/fluid_step.h"

namespace weft::routing {

std::vector<double> SimResult::utilisation() const {
  std::vector<double> u(link_bytes.size(), 0.0);
  if (seconds <= 0) return u;
  for (size_t l = 0; l < u.size(); ++l) u[l] = capacity_Bps[l] > 0 ? link_bytes[l] / (capacity_Bps[l] * seconds) : 0;
  return u;
}

double algbw(uint64_t bytes, double seconds) { return seconds > 0 ? static_cast<double>(bytes) / seconds : 0; }

double allreduce_busbw(uint64_t bytes, int ranks, double seconds) {
  return ranks > 0 ? algbw(bytes, seconds) * 2.0 * (ranks - 1) / ranks : 0;
}

Result<SimResult> simulate(const topo::Fabric& f, const ranking::RankOrder& order, const Schedule& s, Router& router,
                           const SimOptions& opt) {
  if (order.size() != s.ranks) {
    return invalid_argument(fmt::format("the rank order has {} ranks but the schedule is for {}", order.size(), s.ranks));
  }
  if (opt.hop_latency_s < 0) return invalid_argument("per-hop latency must be >= 0");
  SimResult out;
  out.capacity_Bps.resize(2 * f.links.size());
  for (size_t l = 0; l < f.links.size(); ++l) {
    const double c = f.links[l].state == topo::LinkState::kUp ? f.links[l].gbps * 1e9 / 8 : 0;
    out.capacity_Bps[2 * l] = out.capacity_Bps[2 * l + 1] = c;
  }
  out.link_bytes.assign(out.capacity_Bps.size(), 0.0);
  FluidStep fluid(out.capacity_Bps);
  std::vector<Path> paths;
  std::vector<std::vector<int>> links;
  std::vector<double> left;
  std::vector<int> load(out.capacity_Bps.size(), 0);
  for (size_t si = 0; si < s.steps.size(); ++si) {
    const Step& st = s.steps[si];
    const size_t n = st.flows.size();
    paths.resize(n);
    for (auto& p : paths) p.dlinks.clear();
    auto rs = router.route_step(st, static_cast<int>(si), paths);
    if (!rs) return rs.with_context(fmt::format("step {} ({} d={})", si, st.phase, st.distance));
    SimStep ss;
    ss.step = static_cast<int>(si);
    ss.phase = st.phase;
    ss.repeat = st.repeat;
    for (size_t i = 0; i < n; ++i) {
      if (st.flows[i].round < 0) {
        return invalid_argument(fmt::format("step {}: rank {} -> {} has round {}", si, st.flows[i].src,
                                            st.flows[i].dst, st.flows[i].round));
      }
      ss.rounds = std::max(ss.rounds, st.flows[i].round + 1);
      for (int l : paths[i].dlinks) {
        if (out.capacity_Bps[static_cast<size_t>(l)] <= 0) {
          return failed_precondition(fmt::format("step {}: rank {} -> {} is routed over '{}', which is down", si,
                                                 st.flows[i].src, st.flows[i].dst, f.directed_name(l)));
        }
        out.link_bytes[static_cast<size_t>(l)] += static_cast<double>(st.flows[i].bytes);
      }
    }
    // Rounds run one after another (docs/route-plan.md "Rounds"), each
    // round's flows max-min fair among themselves; a step without rounds is
    // one round. Empty rounds take no time.
    double one_repeat = 0;
    for (int r = 0; r < ss.rounds; ++r) {
      size_t m = 0;
      for (size_t i = 0; i < n; ++i) m += st.flows[i].round == r && !paths[i].dlinks.empty();
      links.resize(m);  // keeps the inner vectors' capacity from step to step
      left.clear();
      size_t hops = 0;
      for (size_t i = 0; i < n; ++i) {
        // An in-NIC flow (planes.h) has no path and takes no time.
        if (st.flows[i].round != r || paths[i].dlinks.empty()) continue;
        links[left.size()] = paths[i].dlinks;
        for (int l : paths[i].dlinks) ss.max_load = std::max(ss.max_load, ++load[static_cast<size_t>(l)]);
        hops = std::max(hops, paths[i].dlinks.size());
        left.push_back(static_cast<double>(st.flows[i].bytes) / st.repeat);
      }
      for (const auto& ls : links) {
        for (int l : ls) load[static_cast<size_t>(l)] = 0;
      }
      if (links.empty()) continue;
      auto run = fluid.run(links, left);
      if (!run) return run.status().with_context(fmt::format("step {} ({} d={}) round {}", si, st.phase, st.distance, r));
      ss.events += run->events;
      ss.solves += run->solves;
      one_repeat += run->seconds + static_cast<double>(hops) * opt.hop_latency_s;
    }
    ss.seconds = st.repeat * one_repeat;
    out.seconds += ss.seconds;
    out.steps.push_back(std::move(ss));
  }
  return out;
}

}  // namespace weft::routing
