// Which pairs a communicator connects, and when (communicator.h
// "Connections"): at setup the peers of every algorithm kAuto may run here,
// the rest in the first call that needs them.
//
// Why not every pair: TCP holds two sockets per peer, so a rank of P
// connected to all others holds 2 (P - 1) descriptors (the default limit of
// 1024 is reached near 500 ranks), and shared memory a 2 MiB ring per peer
// (128 ranks of one host: 32 GiB). Halving-doubling needs log2 P partners
// and the ring two. The sets come from the plans themselves
// (Plan::peers), so they are exactly what the algorithms will touch.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "communicator_impl.h"
#include "stall.h"

namespace weft::coll {

std::vector<bool> Communicator::Impl::setup_peers() {
  const int n = cfg.size;
  std::vector<bool> out(static_cast<size_t>(n), false);
  // A plan of `make` on `group` (count 1 per rank: the peers do not depend
  // on the count), its peers marked.
  auto add = [&](MakePlanFn make, const std::vector<int>& group, bool with_gates) {
    internal::Shape s;
    s.size = static_cast<int>(group.size());
    for (size_t i = 0; i < group.size(); ++i) {
      if (group[i] == cfg.rank) s.rank = static_cast<int>(i);
      s.host_of.push_back(host_of[static_cast<size_t>(group[i])]);
    }
    s.count = group.size();
    s.esize = 4;
    s.group = &group;
    if (with_gates) s.gates = &gates;
    for (int g : make(s)->peers()) out[static_cast<size_t>(group[static_cast<size_t>(g)])] = true;
  };
  // As in execute(): gates bind the plan's algorithm on its own rank order only.
  auto gates_bind = [&](Algorithm a, const std::vector<int>& group) {
    return a == gated && !gates.empty() && group == identity_group;
  };
  // AllReduce by size (and barrier's butterfly), each on its rank map; an
  // algorithm no order of which avoids the failed links fails in its calls.
  const std::pair<Algorithm, MakePlanFn> by_size[] = {{Algorithm::kButterfly, internal::plan_allreduce_butterfly},
                                                       {Algorithm::kHalvingDoubling, internal::plan_allreduce_hd},
                                                       {Algorithm::kRing, internal::plan_allreduce_ring}};
  for (const auto& [a, make] : by_size) {
    auto map = rank_map(a);
    if (!map) continue;
    add(make, **map, gates_bind(a, **map));
  }
  if (auto_picks.uses(Algorithm::kOneShot)) {
    add(internal::plan_allreduce_oneshot, identity_group, false);
  }
  add(internal::plan_reduce_scatter_ring, identity_group, false);
  add(internal::plan_allgather_ring, identity_group, false);
  if (equal_multi_host) {
    // On its rank map, as execute() runs it: the identity order's partners
    // may be the pair a failed link joins (remap_hybrid.cc); with its gates
    // where they bind it (its gate tokens' peers are peers too).
    if (auto_picks.uses(Algorithm::kHybrid)) {
      if (auto map = rank_map(Algorithm::kHybrid)) {
        add(internal::plan_allreduce_hybrid, **map, gates_bind(Algorithm::kHybrid, **map));
      }
    }
    add(internal::plan_allgather_hierarchical, identity_group, false);  // kAuto's AllGather there
  }
  out[static_cast<size_t>(cfg.rank)] = false;
  return out;
}

void Communicator::Impl::link(int peer) {
  const auto p = static_cast<size_t>(peer);
  Pair* pair = transports[static_cast<size_t>(links.transport_of[p])]->pair(peer);
  links.pairs[p] = pair;
  links.exchangers[p] = dynamic_cast<internal::ExchangePair*>(pair);
}

Status Communicator::Impl::connect_plan_peers(const internal::Plan& p, const std::vector<int>& group,
                                              Deadline deadline, std::chrono::milliseconds timeout) {
  std::vector<std::vector<int>> missing(transports.size());
  bool any = false;
  for (int g : p.peers()) {
    const int r = group[static_cast<size_t>(g)];
    if (links.pairs[static_cast<size_t>(r)] != nullptr) continue;
    missing[static_cast<size_t>(links.transport_of[static_cast<size_t>(r)])].push_back(r);
    any = true;
  }
  if (!any) return ok_status();
  for (size_t t = 0; t < transports.size(); ++t) {
    if (missing[t].empty()) continue;
    Status s = transports[t]->connect_peers(missing[t], deadline);
    int waits_on = -1;
    for (int r : missing[t]) {
      link(r);
      if (links.pairs[static_cast<size_t>(r)] == nullptr && waits_on < 0) waits_on = r;
    }
    // A peer that does not connect in time is waited on like one that does
    // not send: the stall is resolved (stall.h), naming the stopped rank.
    if (s.code() == StatusCode::kDeadlineExceeded) {
      return internal::resolve_stall(links, cfg.rank, waits_on, s, internal::stall_window(timeout));
    }
    if (!s) return s.with_context(fmt::format("connecting to rank{} {}", missing[t].size() == 1 ? "" : "s",
                                              fmt::join(missing[t], ", ")));
    if (waits_on >= 0) {
      return internal_error(fmt::format("{} transport connected, but has no pair for rank {}",
                                        transports[t]->name(), waits_on));
    }
  }
  return ok_status();
}

}  // namespace weft::coll
