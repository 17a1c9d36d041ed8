#include "weft/routing/router.h"

#include <arpa/inet.h>

#include <algorithm>

#include <fmt/format.h>

#include "weft/routing/edge_coloring.h"
#include "weft/routing/planes.h"

namespace weft::routing {

uint32_t nic_ipv4(const topo::Fabric& f, int nic) {
  const auto& a = f.nics[nic].address;
  in_addr addr{};
  if (!a.empty() && inet_pton(AF_INET, a.c_str(), &addr) == 1) return ntohl(addr.s_addr);
  auto n = static_cast<uint32_t>(nic);
  return (10u << 24) | (((n >> 16) & 0xFF) << 16) | (((n >> 8) & 0xFF) << 8) | (n & 0xFF);
}

namespace {

// ---- ideal ------------------------------------------------------------------

class IdealRouter final : public Router {
 public:
  IdealRouter(const topo::Fabric& f, const ranking::RankOrder& order) : f_(f), order_(order), pf_(f) {
    // A rail fabric is a 2-tier Clos whose leaves are grouped by rail; a
    // multi-plane one is a 2-tier Clos per plane, coloured plane by plane.
    exact_clos2_ = f.kind == topo::FabricKind::kClos2 || f.kind == topo::FabricKind::kRail;
    spines_.assign(static_cast<size_t>(std::max(1, f.num_planes())), {});
    for (size_t s = 0; s < f.switches.size() && exact_clos2_; ++s) {
      if (f.switches[s].tier == topo::kTierSpine) spines_[plane_of(static_cast<int>(s))].push_back(static_cast<int>(s));
      else if (f.switches[s].tier != topo::kTierLeaf) exact_clos2_ = false;
    }
    for (const auto& l : f.links) {
      if (l.state != topo::LinkState::kUp) exact_clos2_ = false;
    }
    // Every leaf must reach every spine of its plane directly for the colouring to apply.
    for (size_t s = 0; s < f.switches.size() && exact_clos2_; ++s) {
      if (f.switches[s].tier == topo::kTierLeaf &&
          f.switch_neighbours(static_cast<int>(s)).size() != spines_[plane_of(static_cast<int>(s))].size()) {
        exact_clos2_ = false;
      }
    }
    load_.assign(2 * f.links.size(), 0);
  }

  std::string_view name() const override { return "ideal"; }

  Status route_step(const Step& step, int step_index, std::vector<Path>& paths) override {
    (void)step_index;
    if (exact_clos2_ && route_colouring(step, paths)) return ok_status();
    return route_greedy(step, paths);
  }

 private:
  size_t plane_of(int sw) const { return static_cast<size_t>(std::max(0, f_.switches[static_cast<size_t>(sw)].plane)); }

  // König colouring of the step's leaf->leaf multigraph with the spines, one
  // plane at a time (planes share no spine).
  bool route_colouring(const Step& step, std::vector<Path>& paths) {
    std::vector<std::vector<BipartiteEdge>> edges(spines_.size());
    std::vector<std::vector<size_t>> edge_flow(spines_.size());
    const int ns = static_cast<int>(f_.switches.size());
    for (size_t i = 0; i < step.flows.size(); ++i) {
      const auto [s, d] = flow_nics(f_, order_, step.flows[i]);
      if (d < 0) return false;  // cross-plane: route_greedy names it
      if (s == d) continue;     // in-NIC: no path (planes.h)
      int ls = f_.nic_switch(s), ld = f_.nic_switch(d);
      if (ls == ld) {
        paths[i].dlinks = {f_.directed_from(f_.nic_link(s), f_.nic_vertex(s)),
                           f_.directed_from(f_.nic_link(d), f_.switch_vertex(ld))};
        continue;
      }
      edges[plane_of(ls)].push_back({ls, ld});
      edge_flow[plane_of(ls)].push_back(i);
    }
    for (size_t p = 0; p < spines_.size(); ++p) {
      if (edges[p].empty()) continue;
      auto colours = color_bipartite_edges(ns, ns, edges[p], static_cast<int>(spines_[p].size()));
      if (!colours) return false;  // more flows per leaf than spines: fall back
      for (size_t e = 0; e < edges[p].size(); ++e) {
        const auto [s, d] = flow_nics(f_, order_, step.flows[edge_flow[p][e]]);
        int via[3] = {edges[p][e].left, spines_[p][static_cast<size_t>((*colours)[e])], edges[p][e].right};
        auto path = pf_.route_via(s, d, via);
        if (!path) return false;
        paths[edge_flow[p][e]] = std::move(*path);
      }
    }
    return true;
  }

  Status route_greedy(const Step& step, std::vector<Path>& paths) {
    std::fill(load_.begin(), load_.end(), 0);
    auto least_loaded = [&](int, std::span<const int> c) {
      size_t best = 0;
      for (size_t i = 1; i < c.size(); ++i) {
        if (load_[c[i]] < load_[c[best]]) best = i;
      }
      return best;
    };
    for (size_t i = 0; i < step.flows.size(); ++i) {
      WEFT_ASSIGN_OR_RETURN(const FlowNics n, routed_nics(f_, order_, step.flows[i]));
      if (n.in_nic()) continue;
      auto p = pf_.route(n.src, n.dst, least_loaded);
      if (!p) return p.status();
      for (int dl : p->dlinks) ++load_[dl];
      paths[i] = std::move(*p);
    }
    return ok_status();
  }

  const topo::Fabric& f_;
  const ranking::RankOrder& order_;
  PathFinder pf_;
  bool exact_clos2_ = false;
  std::vector<std::vector<int>> spines_;  // per plane (one list without planes)
  std::vector<int> load_;
};

// ---- ecmp -------------------------------------------------------------------

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class EcmpRouter final : public Router {
 public:
  EcmpRouter(const topo::Fabric& f, const ranking::RankOrder& order, const EcmpOptions& opt,
             std::unique_ptr<EcmpHash> hash)
      : f_(f), order_(order), opt_(opt), pf_(f), hash_(std::move(hash)) {}

  std::string_view name() const override { return "ecmp"; }

  Status route_step(const Step& step, int, std::vector<Path>& paths) override {
    for (size_t i = 0; i < step.flows.size(); ++i) {
      WEFT_ASSIGN_OR_RETURN(const FlowNics n, routed_nics(f_, order_, step.flows[i]));
      if (n.in_nic()) continue;
      const FiveTuple t = ecmp_tuple(f_, opt_, hash_->hashes_qpn(), step.flows[i], n.src, n.dst);
      auto p = pf_.route(n.src, n.dst, [&](int sw, std::span<const int> c) { return hash_->pick(t, sw, c.size()); });
      if (!p) return p.status();
      paths[i] = std::move(*p);
    }
    return ok_status();
  }

 private:
  const topo::Fabric& f_;
  const ranking::RankOrder& order_;
  EcmpOptions opt_;
  PathFinder pf_;
  std::unique_ptr<EcmpHash> hash_;
};

// ---- crossbar ---------------------------------------------------------------

class CrossbarRouter final : public Router {
 public:
  CrossbarRouter(const topo::Fabric& f, const ranking::RankOrder& order) : f_(f), order_(order) {}
  std::string_view name() const override { return "crossbar"; }
  Status route_step(const Step& step, int, std::vector<Path>& paths) override {
    for (size_t i = 0; i < step.flows.size(); ++i) {
      // The same ends as on the fabric (planes.h), so an in-NIC flow costs
      // nothing here either; a crossbar joins every port, planes or not.
      auto [s, d] = flow_nics(f_, order_, step.flows[i]);
      if (s == d) continue;
      if (d < 0) d = order_.nics[static_cast<size_t>(step.flows[i].dst)];
      WEFT_RETURN_IF_ERROR(check_flow_access(f_, step.flows[i], s, d));  // a dead cable is dead here too
      paths[i].dlinks = {f_.directed_from(f_.nic_link(s), f_.nic_vertex(s)),
                         f_.directed_from(f_.nic_link(d), f_.switch_vertex(f_.nic_switch(d)))};
    }
    return ok_status();
  }

 private:
  const topo::Fabric& f_;
  const ranking::RankOrder& order_;
};

}  // namespace

std::unique_ptr<Router> make_crossbar_router(const topo::Fabric& f, const ranking::RankOrder& order) {
  return std::make_unique<CrossbarRouter>(f, order);
}

std::unique_ptr<Router> make_ideal_router(const topo::Fabric& f, const ranking::RankOrder& order) {
  return std::make_unique<IdealRouter>(f, order);
}

FiveTuple ecmp_tuple(const topo::Fabric& f, const EcmpOptions& opt, bool draw_qpn, const Flow& fl, int src_nic,
                     int dst_nic) {
  const uint64_t span = static_cast<uint64_t>(opt.port_hi - opt.port_lo) + 1;
  // One connection per directed rank pair; its ephemeral port is drawn once.
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(fl.src)) << 32) | static_cast<uint32_t>(fl.dst);
  const uint64_t draw = splitmix64(key ^ (uint64_t{opt.seed} << 20));
  FiveTuple t{nic_ipv4(f, src_nic), nic_ipv4(f, dst_nic), opt.proto, static_cast<uint16_t>(opt.port_lo + draw % span),
              opt.dport};
  // The QPN from other bits of the draw than the port's.
  if (draw_qpn) t.dqpn = kMinDataQpn + static_cast<uint32_t>((draw >> 32) % (kMaxQpn - kMinDataQpn + 1));
  return t;
}

Result<std::unique_ptr<Router>> make_ecmp_router(const topo::Fabric& f, const ranking::RankOrder& order,
                                                 const EcmpOptions& opt) {
  WEFT_ASSIGN_OR_RETURN(auto hash, make_hash(opt.hash, opt.seed));
  return std::unique_ptr<Router>(std::make_unique<EcmpRouter>(f, order, opt, std::move(hash)));
}

}  // namespace weft::routing
