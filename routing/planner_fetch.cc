// The route planner's candidates (planner_internal.h: RouteFilter,
// CandidateFetcher): which routes a flow may take, and the path table's
// ports for every flow of a class.
#include <algorithm>
#include <system_error>

#include "planner_internal.h"

namespace weft::routing::planner_internal {

namespace {

bool is_two_tier(const topo::Fabric& f) {
  if (f.kind == topo::FabricKind::kClos2) return true;
  for (const auto& l : f.links) {
    if (!f.is_switch_vertex(l.a) || !f.is_switch_vertex(l.b)) continue;
    const int ta = f.switches[static_cast<size_t>(f.vertex_switch(l.a))].tier;
    const int tb = f.switches[static_cast<size_t>(f.vertex_switch(l.b))].tier;
    if (std::min(ta, tb) != topo::kTierLeaf || std::max(ta, tb) != topo::kTierSpine) return false;
  }
  return f.num_tiers() == 2;
}

}  // namespace

RouteFilter::RouteFilter(const topo::Fabric& f) : f_(f), two_tier_(is_two_tier(f)), colour_of_(f.switches.size(), -1) {
  if (!two_tier_) clos3_ = Clos3Shape::of(f);
  for (size_t sw = 0; sw < f.switches.size(); ++sw) {
    if (f.switches[sw].tier == topo::kTierSpine) colour_of_[sw] = n_colours_++;
  }
  if (!two_tier_) return;
  up_.assign(f.switches.size() * static_cast<size_t>(n_colours_), 0);
  for (const auto& l : f.links) {
    if (l.state != topo::LinkState::kUp || !f.is_switch_vertex(l.a) || !f.is_switch_vertex(l.b)) continue;
    int a = f.vertex_switch(l.a), b = f.vertex_switch(l.b);
    if (colour_of_[static_cast<size_t>(a)] >= 0) std::swap(a, b);
    up_[static_cast<size_t>(a) * static_cast<size_t>(n_colours_) + static_cast<size_t>(colour_of_[static_cast<size_t>(b)])] = 1;
  }
}

// On a 2-tier Clos a cross-leaf route is leaf, spine, leaf (a lookup in
// up_), on a 3-tier one a route with a key (clos3_coloring.h: lookups too).
bool RouteFilter::is_up(std::span<const int> rt) const {
  if (clos3_ && rt.size() != 1) return clos3_->key(rt).has_value();
  if (two_tier_ && rt.size() != 1) {
    if (rt.size() != 3) return false;
    const int c = colour_of_[static_cast<size_t>(rt[1])];
    return c >= 0 && up_[static_cast<size_t>(rt[0]) * static_cast<size_t>(n_colours_) + static_cast<size_t>(c)] &&
           up_[static_cast<size_t>(rt[2]) * static_cast<size_t>(n_colours_) + static_cast<size_t>(c)];
  }
  for (size_t i = 0; i + 1 < rt.size(); ++i) {
    auto l = f_.link_between(f_.switch_vertex(rt[i]), f_.switch_vertex(rt[i + 1]));
    if (!l || f_.links[static_cast<size_t>(*l)].state != topo::LinkState::kUp) return false;
  }
  return true;
}

int RouteFilter::colour(std::span<const int> rt) const {
  if (two_tier_) return rt.size() == 3 ? colour_of_[static_cast<size_t>(rt[1])] : -1;
  if (!clos3_ || rt.size() == 1) return -1;
  return colour(clos3_->key(rt));
}

Status CandidateFetcher::fetch(const FetchInputs& in, std::vector<FlowInfo>& flows, const std::vector<int>& ids,
                               int n_ports, int c) {
  join();
  cls = c, ports = n_ports, evaluated_ = false;
  status_ = fill(in, flows, ids, n_ports);
  return status_;
}

// The worker writes only the store, its own buffers and the ci of the
// class's flows, which the planner leaves alone until join() (it plans
// another class meanwhile); everything else it reads is FetchInputs.
void CandidateFetcher::fetch_async(const FetchInputs& in, std::vector<FlowInfo>& flows, const std::vector<int>& ids,
                                   int n_ports, int c) {
  join();
  cls = c, ports = n_ports, evaluated_ = false;
  try {
    pending_ = std::async(std::launch::async,
                          [this, &in, &flows, &ids, n_ports] { return fill(in, flows, ids, n_ports); });
  } catch (const std::system_error&) {  // no thread to be had (a pids limit): here, then
    status_ = fill(in, flows, ids, n_ports);
  }
}

// The worker writes this fetcher's buffers: it must end before they go,
// also when the planner returns early (an error in the class before).
// wait(), not get(): an exception it ended with stays in the future.
CandidateFetcher::~CandidateFetcher() {
  if (pending_.valid()) pending_.wait();
}

// An exception the worker ended with (std::bad_alloc) is rethrown here, in
// the planner's thread, as if the fetch had run there.
void CandidateFetcher::join() {
  if (pending_.valid()) status_ = pending_.get();
}

Status CandidateFetcher::fill(const FetchInputs& in, std::vector<FlowInfo>& flows, const std::vector<int>& ids,
                              int n_ports) {
  store.clear(ids.size(), static_cast<size_t>(n_ports));
  answered_ = {-1, -1, -1};
  for (int id : ids) {
    FlowInfo& fi = flows[static_cast<size_t>(id)];
    if (in_nic(fi)) continue;  // no path to plan: a free port only (take_port)
    WEFT_RETURN_IF_ERROR(query(in, flows, fi, n_ports));
  }
  return ok_status();
}

Status CandidateFetcher::query(const FetchInputs& in, std::vector<FlowInfo>& flows, FlowInfo& fi, int n_ports) {
  const topo::Fabric& f = in.f;
  PairQuery q{fi.src_nic, fi.dst_nic, in.opt.protocol == "tcp" ? kProtoTcp : kProtoUdp,
              in.dports[static_cast<size_t>(fi.dst)]};
  if (!in.qpns.empty()) q.dqpns = in.qpns[static_cast<size_t>(fi.dst)];  // E-ECMP: the destination's QPs
  const int ls = f.nic_switch(fi.src_nic), ld = f.nic_switch(fi.dst_nic);
  // Inside one leaf every port takes the same way, but the port must still
  // be one the table holds: a probe database vouches only for the ports it
  // saw answered (planner.h, 2). As many as the host has flows always
  // leave one free (4), and ask no more of the table.
  const int host = f.nics[static_cast<size_t>(fi.src_nic)].host;
  // E-ECMP: every offered (sport, dqpn) may have a QPN another flow into
  // the rank holds already (take_port), so a same-leaf pair asks for all.
  const int want = ls == ld && in.qpns.empty() ? std::min(n_ports, in.host_flows[static_cast<size_t>(host)]) : n_ports;
  // The flows of one pair come one after another (nccl-ring's QPs): ask
  // the table once per pair (and destination rank: its QPNs).
  if (std::tuple(fi.src_nic, fi.dst_nic, fi.dst) != answered_) {
    WEFT_RETURN_IF_ERROR(in.table.ports(q, in.opt.sports, want, answer_));
    answered_ = {fi.src_nic, fi.dst_nic, fi.dst};
  }
  const PairRoutes* offered = &answer_;
  if (fi.pair_group >= 0) {
    share_of(answer_, fi.pair_k, flows[static_cast<size_t>(fi.pair_group)].pair_n, share_);
    offered = &share_;
  }
  fi.ci = store.add_unevaluated(*offered);
  return ok_status();
}

// The routes' usable and colour (CandidateStore::evaluate). On a 3-tier Clos
// the key of every route is the larger part of a fetch: asked here, by the
// planner's thread, it leaves the second thread the table's share alone.
void CandidateFetcher::evaluate(const FetchInputs& in, const std::vector<FlowInfo>& flows,
                                const std::vector<int>& ids) {
  evaluated_ = true;
  const RouteFilter& filter = in.filter;
  const auto& clos3 = filter.clos3();
  for (int id : ids) {
    const FlowInfo& fi = flows[static_cast<size_t>(id)];
    if (in_nic(fi)) continue;
    const int ls = in.f.nic_switch(fi.src_nic), ld = in.f.nic_switch(fi.dst_nic);
    // 3-tier: a route's key serves both usable and colour, which evaluate()
    // asks one after the other of one route.
    const int* keyed = nullptr;
    std::optional<Clos3Key> key;
    store.evaluate(
        fi.ci,
        [&](std::span<const int> rt) {
          if (rt.empty() || rt.front() != ls || rt.back() != ld) return false;
          if (!clos3 || rt.size() == 1) return filter.is_up(rt);
          keyed = rt.data(), key = clos3->key(rt);
          return key.has_value();
        },
        [&](std::span<const int> rt) {
          return clos3 && rt.size() != 1 && rt.data() == keyed ? filter.colour(key) : filter.colour(rt);
        });
  }
}

// Flow k's share of a pair's ports when the pair has n flows: route by
// route, the ports are dealt round-robin over the flows (continuing from
// one route to the next), so no two flows of the pair compete for a port
// and a route with p ports is open to min(p, n) of them. Without shares
// the colouring, which balances leaves and not pairs, may put more of a
// pair's flows on a spine than the pair has ports there, and replanning
// strikes one flow at a time. Routes left without a port are dropped.
void CandidateFetcher::share_of(const PairRoutes& all, int k, int n, PairRoutes& out) {
  out.clear();
  // Counting sort of the ports by route, keeping their order of preference.
  route_start_.assign(all.num_routes() + 1, 0);
  for (const PortRoute& p : all.ports) ++route_start_[static_cast<size_t>(p.route) + 1];
  for (size_t r = 0; r < all.num_routes(); ++r) route_start_[r + 1] += route_start_[r];
  by_route_.resize(all.ports.size());
  route_fill_.assign(route_start_.begin(), route_start_.end() - 1);
  for (const PortRoute& p : all.ports) by_route_[static_cast<size_t>(route_fill_[static_cast<size_t>(p.route)]++)] = p;
  for (size_t r = 0; r < all.num_routes(); ++r) {
    int mine = -1;
    for (int i = route_start_[r]; i < route_start_[r + 1]; ++i) {
      if (i % n != k) continue;  // the i-th port overall goes to flow i mod n
      if (mine < 0) mine = out.add_route(all.route(r));
      PortRoute p = by_route_[static_cast<size_t>(i)];
      p.route = mine;
      out.ports.push_back(p);
    }
  }
}

}  // namespace weft::routing::planner_internal
