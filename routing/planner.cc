// The route planner (planner.h): flows and classes, candidate ports, the
// colouring per class, ports. Output: planner_output.cc.
#include "weft/routing/planner.h"

#include <algorithm>
#include <array>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "planner_internal.h"
#include "weft/routing/candidates.h"
#include "weft/routing/clos3_coloring.h"
#include "weft/routing/link_load.h"
#include "weft/routing/list_edge_coloring.h"
#include "weft/routing/planes.h"
#include "weft/routing/route_assignment.h"

namespace weft::routing {

namespace {

using planner_internal::CandidateFetcher;
using planner_internal::Chosen;
using planner_internal::FetchInputs;
using planner_internal::FlowInfo;
using planner_internal::in_nic;
using planner_internal::RouteFilter;

// A try from fewer ports searches less hard: the full lists are searched
// anyway where it fails (plan_class_fewer_first).
constexpr int kTryBudget = 2000;
// A class fetched ahead on a thread has at least this many flows: below, the
// thread costs more than the overlap saves.
constexpr size_t kFetchAheadFlows = 1024;

class Planner {
 public:
  Planner(const topo::Fabric& f, const ranking::RankOrder& order, const Schedule& s, PathTable& table,
          const PlannerOptions& opt, std::vector<uint16_t> dports, QpnPool qpns)
      : f_(f), order_(order), s_(s), table_(table), opt_(opt), dports_(std::move(dports)), qpns_(std::move(qpns)),
        table_name_(table.describe()), filter_(f), used_(f.hosts.size()) {
    if (filter_.clos3()) colorer3_.emplace(*filter_.clos3());
  }

  Result<PlannedRoutes> run() {
    WEFT_RETURN_IF_ERROR(collect());
    if (table_.hashes_qpn()) {
      // E-ECMP: without a pool, the default one, with a QPN per flow into
      // the busiest rank at least (each QPN serves one flow, take_port).
      if (qpns_.empty()) {
        std::vector<int> in(static_cast<size_t>(s_.ranks), 0);
        for (const FlowInfo& fi : flows_) ++in[static_cast<size_t>(fi.dst)];
        const int per = std::max(kDefaultQpnsPerRank, *std::max_element(in.begin(), in.end()));
        if (kDefaultQpnBase + static_cast<uint64_t>(s_.ranks) * static_cast<uint64_t>(per) - 1 > kMaxQpn) {
          return invalid_argument(fmt::format("the default QPN pool ({} QPNs for each of {} ranks) does not fit in "
                                              "24 bits: pass the job's own (--qpn-pool)", per, s_.ranks));
        }
        qpns_ = default_qpn_pool(s_.ranks, per);
      }
      used_qpns_.assign(qpns_.size(), {});
    }
    PlannedRoutes out;
    RoundAssigner assigner(rounds_ ? 2 * static_cast<int>(f_.links.size()) : 0);
    std::vector<int> round;
    Chosen chosen{flows_, path_pool_, classes_, step_ids_};
    bool has_rounds = false;
    for (size_t c = 0; c < classes_.size(); ++c) {
      WEFT_RETURN_IF_ERROR(plan_class_fewer_first(c, out.stats));
      // Each class's rounds as soon as it has its paths: meanwhile the
      // second thread fetches the next class (candidates()).
      if (rounds_) has_rounds |= planner_internal::assign_class_rounds(f_, chosen, classes_[c], assigner, round);
    }
    out.stats.planned_classes = static_cast<int>(classes_.size());
    WEFT_RETURN_IF_ERROR(planner_internal::emit_plan(f_, order_, s_, opt_, dports_, chosen, has_rounds, second_thread_, out));
    return out;
  }

 private:
  // Flows and classes of steps with one flow set (see planner.h, 1).
  Status collect() {
    // Flows by source rank: a rank has a few dozen partners (nccl-ring: its
    // successor's channels x QPs), so a short scan beats a hash map of every
    // flow.
    std::vector<std::vector<std::pair<FlowId, int>>> out_of(static_cast<size_t>(s_.ranks));  // (flow, index)
    std::vector<int> seen_in_step;
    size_t total = 0;
    for (const Step& st : s_.steps) total += st.flows.size();
    flows_.reserve(total);  // on 4 KiB pages, as the plan (planner_output.cc)
    for (size_t si = 0; si < s_.steps.size(); ++si) {
      const Step& st = s_.steps[si];
      std::vector<int> ids;
      ids.reserve(st.flows.size());
      int known = 0, cls = -2;
      for (const Flow& fl : st.flows) {
        auto& outs = out_of[static_cast<size_t>(fl.src)];
        const FlowId key = flow_id(fl);
        auto it = std::find_if(outs.begin(), outs.end(), [&](const auto& p) { return p.first == key; });
        int id = 0;
        if (it == outs.end()) {
          id = static_cast<int>(flows_.size());
          FlowInfo fi;
          fi.src = fl.src, fi.dst = fl.dst, fi.conn = fl.conn, fi.qp = fl.qp;
          auto same_pair = std::find_if(outs.begin(), outs.end(), [&](const auto& p) { return p.first.dst == fl.dst; });
          if (same_pair != outs.end()) {
            FlowInfo& first = flows_[static_cast<size_t>(same_pair->second)];
            first.pair_group = same_pair->second;
            fi.pair_group = same_pair->second;
            fi.pair_k = first.pair_n++;
          }
          outs.emplace_back(key, id);
          // The port it arrives at: the destination's own, or its NIC's port
          // on the source's plane (planes.h).
          WEFT_ASSIGN_OR_RETURN(const FlowNics nics, routed_nics(f_, order_, fl));
          fi.src_nic = nics.src, fi.dst_nic = nics.dst;
          flows_.push_back(std::move(fi));
          class_of_.push_back(-1);
          seen_in_step.push_back(-1);
        } else {
          id = it->second;
          ++known;
          const int c = class_of_[static_cast<size_t>(id)];
          cls = cls == -2 || cls == c ? c : -1;
        }
        if (seen_in_step[static_cast<size_t>(id)] == static_cast<int>(si)) {
          return unimplemented(fmt::format("step {} has two flows {} -> {} with connection {}, QP {}", si, fl.src, fl.dst,
                                           fl.conn, fl.qp));
        }
        seen_in_step[static_cast<size_t>(id)] = static_cast<int>(si);
        ids.push_back(id);
      }
      if (known == 0) {
        cls = static_cast<int>(classes_.size());
        for (int id : ids) class_of_[static_cast<size_t>(id)] = cls;
        classes_.push_back(ids);
      } else if (known != static_cast<int>(ids.size()) || cls < 0 ||
                 classes_[static_cast<size_t>(cls)].size() != ids.size()) {
        return unimplemented(fmt::format(
            "step {} ({}) shares some but not all flows with an earlier step; a flow keeps one port for the whole "
            "collective, so such schedules cannot be planned step by step", si, st.phase));
      }
      for (int id : ids) flows_[static_cast<size_t>(id)].steps.push_back(static_cast<int>(si));
      step_ids_.push_back(std::move(ids));
    }
    host_flows_.assign(f_.hosts.size(), 0);
    used_mask_.assign(f_.hosts.size(), 0);
    for (const FlowInfo& fi : flows_) ++host_flows_[static_cast<size_t>(f_.nics[static_cast<size_t>(fi.src_nic)].host)];
    return ok_status();
  }

  // Routes whose every offered port the host already uses (earlier classes)
  // are struck before colouring: take_port would strike them after it, at
  // the cost of colouring the class again. used_mask_ filters the ports to
  // look up in used_ (a bit per port hash, set by take_port, never cleared).
  void strike_taken(FlowInfo& fi) {
    const int host = f_.nics[static_cast<size_t>(fi.src_nic)].host;
    if (used_mask_[static_cast<size_t>(host)] == 0) return;
    const auto& used = used_[static_cast<size_t>(host)];
    free_on_.assign(cands_->num_routes(fi.ci), 0);
    bool some_taken = false;
    for (const PortRoute& pr : cands_->ports(fi.ci)) {
      const bool taken = (used_mask_[static_cast<size_t>(host)] & port_bit(pr.sport)) != 0 &&
                         std::find(used.begin(), used.end(), pr.sport) != used.end();
      some_taken |= taken;
      free_on_[static_cast<size_t>(pr.route)] |= !taken;
    }
    if (!some_taken) return;
    for (size_t r = 0; r < free_on_.size(); ++r) {
      if (!free_on_[r] && cands_->usable(fi.ci, r)) cands_->strike(fi.ci, static_cast<int>(r)), ++fi.struck;
    }
  }
  static uint64_t port_bit(uint16_t p) { return uint64_t{1} << ((p * 0x9E37u) >> 10 & 63); }

  std::string flow_name(const FlowInfo& fi) const {
    return fmt::format("rank {} ({}) -> rank {} ({})", fi.src, f_.nic_qualified_name(fi.src_nic), fi.dst,
                       f_.nic_qualified_name(fi.dst_nic));
  }

  // Why a flow found no free port, and what to widen by how much: every flow
  // of a host needs its own source port (planner.h, 4), so a pair needs as
  // many ports on a route as its host has flows to be sure of one.
  std::string starved_message(const FlowInfo& fi) const {
    const int host = f_.nics[static_cast<size_t>(fi.src_nic)].host;
    const int need = host_flows_[static_cast<size_t>(host)];
    if (in_nic(fi)) {
      return fmt::format("no free source port for {}: host '{}' sends {} flows, each on a source port of its own, and "
                         "the source port range {}-{} holds {}: widen it (--sport-range)", flow_name(fi),
                         f_.hosts[static_cast<size_t>(host)].name, need, opt_.sports.lo, opt_.sports.hi,
                         opt_.sports.size());
    }
    const auto ports = cands_->ports(fi.ci);
    std::string per_route;
    for (size_t r = 0; r < cands_->num_routes(fi.ci); ++r) {
      const auto rt = cands_->route(fi.ci, r);
      const auto n = std::count_if(ports.begin(), ports.end(), [&](const PortRoute& p) { return p.route == static_cast<int>(r); });
      per_route += fmt::format("{}{} {}", per_route.empty() ? "" : ", ",
                               rt.size() == 3 ? f_.switches[static_cast<size_t>(rt[1])].name : std::string("leaf"), n);
    }
    const std::string head = fmt::format(
        "no free source port for {}: host '{}' sends {} flows, each on a source port of its own, and every port {} "
        "holds for this pair on a usable route is taken (ports per route: {})",
        flow_name(fi), f_.hosts[static_cast<size_t>(host)].name, need, table_name_, per_route);
    if (!qpns_.empty()) {  // E-ECMP: a choice is free when its port and its QPN are (take_port)
      const size_t pool = qpns_[static_cast<size_t>(fi.dst)].size();
      const auto into = std::count_if(flows_.begin(), flows_.end(), [&](const FlowInfo& g) { return g.dst == fi.dst; });
      if (used_qpns_[static_cast<size_t>(fi.dst)].size() >= pool) {
        return fmt::format("no free QPN for {}: each of rank {}'s {} QPN{} serves another flow into it (an RC QP "
                           "connects to one remote QP), and {} flows come into it: publish at least {} QPNs per rank "
                           "(--qpn-pool)", flow_name(fi), fi.dst, pool, pool == 1 ? "" : "s", into, into);
      }
      return fmt::format("{}, or its QPN serves another flow into rank {} ({} QPNs): publish more QPNs (--qpn-pool) "
                         "or ask for more ports (--ports-per-pair {})", head, fi.dst, pool, 2 * opt_.ports_per_pair);
    }
    if (opt_.sports.size() < static_cast<uint32_t>(need)) {
      return fmt::format("{}; the source port range {}-{} holds {} ports: widen it by at least {} (--sport-range)", head,
                         opt_.sports.lo, opt_.sports.hi, opt_.sports.size(), need - static_cast<int>(opt_.sports.size()));
    }
    if (table_name_.rfind("model", 0) == 0) {  // a model answers any number of ports: ask for enough
      const size_t enough = static_cast<size_t>(need) * std::max<size_t>(1, cands_->num_routes(fi.ci));
      return fmt::format("{}; {} ports per pair were asked of the model: ask for more (--ports-per-pair {})", head,
                         opt_.ports_per_pair, std::max<size_t>(enough, 2 * static_cast<size_t>(opt_.ports_per_pair)));
    }
    if (ports.size() >= static_cast<size_t>(opt_.ports_per_pair)) {
      return fmt::format("{}; {} ports per pair were asked for: ask for more (--ports-per-pair {})", head,
                         opt_.ports_per_pair, 2 * opt_.ports_per_pair);
    }
    return fmt::format("{}; re-probe this pair until each spine it uses has {} answered ports "
                       "(weft probe --targeted ... --ports-per-spine {}, or more --ports)", head, need, need);
  }

  std::string no_route_message(const FlowInfo& fi) const {
    return fmt::format("no usable route for {}: {} holds no answered port of this pair in {}-{} over links that are up "
                       "({} ports offered); re-probe the pair (weft probe), or check that its hosts are in the campaign",
                       flow_name(fi), table_name_, opt_.sports.lo, opt_.sports.hi, cands_->ports(fi.ci).size());
  }

  // Chooses fi.route for every flow of the class.
  Status choose_routes(const std::vector<int>& ids, PlanStats& stats) {
    std::vector<int> fabric;
    for (int id : ids) {
      FlowInfo& fi = flows_[static_cast<size_t>(id)];
      fi.route = -1;
      if (in_nic(fi)) continue;
      for (size_t r = 0; r < cands_->num_routes(fi.ci) && fi.route < 0; ++r) {
        if (cands_->usable(fi.ci, r)) fi.route = static_cast<int>(r);
      }
      if (fi.route < 0 && fi.struck > 0) return failed_precondition(starved_message(fi));
      if (fi.route < 0) return unavailable(no_route_message(fi));
      if (f_.nic_switch(fi.src_nic) != f_.nic_switch(fi.dst_nic)) fabric.push_back(id);
    }
    if (fabric.empty()) return ok_status();
    if (filter_.two_tier()) {
      edges_.resize(fabric.size());  // reused: its colour lists keep their capacity
      for (size_t i = 0; i < fabric.size(); ++i) {
        const FlowInfo& fi = flows_[static_cast<size_t>(fabric[i])];
        edges_[i].left = f_.nic_switch(fi.src_nic);
        edges_[i].right = f_.nic_switch(fi.dst_nic);
        const auto colours = cands_->colours(fi.ci);
        edges_[i].colours.assign(colours.begin(), colours.end());
      }
      const int ns = static_cast<int>(f_.switches.size());
      WEFT_ASSIGN_OR_RETURN(auto col, color_list_edges(ns, ns, filter_.n_colours(), edges_,
                                                     {.budget = trying_ ? kTryBudget : opt_.budget}));
      stats.exact_classes += col.exact;
      fabric_load_ = col.max_load;
      for (size_t i = 0; i < fabric.size(); ++i) {
        FlowInfo& fi = flows_[static_cast<size_t>(fabric[i])];
        const auto colours = cands_->colours(fi.ci);
        const auto k = std::find(colours.begin(), colours.end(), col.colour[i]) - colours.begin();
        fi.route = cands_->colour_routes(fi.ci)[static_cast<size_t>(k)];
      }
      return ok_status();
    }
    if (filter_.clos3()) return choose_clos3(fabric, stats);
    // Candidates as the switch-to-switch links they load (a flow's access
    // links are the same whichever route it takes); buffers reused.
    if (choices_.size() < fabric.size()) choices_.resize(fabric.size());
    route_ids_.resize(fabric.size());
    for (size_t i = 0; i < fabric.size(); ++i) {
      const FlowInfo& fi = flows_[static_cast<size_t>(fabric[i])];
      RouteChoice& ch = choices_[i];
      ch.clear();
      route_ids_[i].clear();
      for (size_t r = 0; r < cands_->num_routes(fi.ci); ++r) {
        if (!cands_->usable(fi.ci, r)) continue;
        const auto rt = cands_->route(fi.ci, r);
        for (size_t k = 0; k + 1 < rt.size(); ++k) {
          const int l = *f_.link_between(f_.switch_vertex(rt[k]), f_.switch_vertex(rt[k + 1]));
          ch.links.push_back(f_.directed_from(l, f_.switch_vertex(rt[k])));
        }
        ch.close_candidate();
        route_ids_[i].push_back(static_cast<int>(r));
      }
    }
    const std::span<const RouteChoice> choices(choices_.data(), fabric.size());
    auto a = assign_routes(2 * static_cast<int>(f_.links.size()), choices);
    for (size_t i = 0; i < fabric.size(); ++i) {
      flows_[static_cast<size_t>(fabric[i])].route = route_ids_[i][static_cast<size_t>(a.chosen[i])];
    }
    return ok_status();
  }

  // 3-tier Clos: slots, then cores (clos3_coloring.h).
  Status choose_clos3(const std::vector<int>& fabric, PlanStats& stats) {
    flows3_.resize(fabric.size());
    keys3_.clear();
    const int stride = filter_.clos3()->plane_size() + 1;
    for (size_t i = 0; i < fabric.size(); ++i) {
      const FlowInfo& fi = flows_[static_cast<size_t>(fabric[i])];
      const auto colours = cands_->colours(fi.ci);
      flows3_[i] = {f_.nic_switch(fi.src_nic), f_.nic_switch(fi.dst_nic), static_cast<uint32_t>(keys3_.size()),
                    static_cast<uint32_t>(colours.size())};
      for (int c : colours) keys3_.push_back({c / stride, c % stride - 1});
    }
    WEFT_ASSIGN_OR_RETURN(auto col, colorer3_->color(flows3_, keys3_, {.budget = opt_.budget}));
    stats.exact_classes += col.max_load <= col.target;
    for (size_t i = 0; i < fabric.size(); ++i) {
      FlowInfo& fi = flows_[static_cast<size_t>(fabric[i])];
      fi.route = cands_->colour_routes(fi.ci)[static_cast<size_t>(col.chosen[i])];
    }
    return ok_status();
  }

  // Ports: the first free candidate on the chosen route (planner.h, 4).
  // Returns false and strikes the route when all its ports are taken.
  bool take_port(FlowInfo& fi, std::vector<std::pair<int, uint16_t>>& taken) {
    const int host = f_.nics[static_cast<size_t>(fi.src_nic)].host;
    auto& used = used_[static_cast<size_t>(host)];
    auto try_port = [&](uint16_t p) {
      if (std::find(used.begin(), used.end(), p) != used.end()) return false;
      used.push_back(p);
      used_mask_[static_cast<size_t>(host)] |= port_bit(p);
      taken.emplace_back(host, p);
      fi.sport = p;
      return true;
    };
    if (in_nic(fi)) {  // any free port of the range: the flow has no path to pick one for
      for (uint32_t p = opt_.sports.lo; p <= opt_.sports.hi; ++p) {
        if (try_port(static_cast<uint16_t>(p))) return true;
      }
      return false;
    }
    // E-ECMP: the port's QP goes with it (path_table.h); a QPN serves one
    // flow, as an RC QP connects to exactly one remote QP (IBTA spec vol. 1
    // 9.7), so a QPN another flow into the rank holds is not free.
    auto* qused = used_qpns_.empty() ? nullptr : &used_qpns_[static_cast<size_t>(fi.dst)];
    for (const PortRoute& pr : cands_->ports(fi.ci)) {
      if (pr.route != fi.route) continue;
      const uint32_t dqpn = qused ? qpns_[static_cast<size_t>(fi.dst)][pr.qpn] : 0;
      if (qused && std::find(qused->begin(), qused->end(), dqpn) != qused->end()) continue;
      if (try_port(pr.sport)) {
        fi.dqpn = dqpn;
        if (qused) qused->push_back(dqpn), taken_qpns_.emplace_back(fi.dst, dqpn);
        return true;
      }
    }
    cands_->strike(fi.ci, fi.route);
    ++fi.struck;
    return false;
  }

  // The path table's cost and the candidate store's grow with the ports
  // asked per pair, and on a 2-tier Clos most classes meet the checker's
  // bound (link_load.h) from a few of them. So a class is planned first from
  // the first opt_.first_ports of the ports_per_pair the table would offer
  // (a model table's draw is a prefix of the longer one, path_table.h), and
  // kept only where that cannot be bettered: the routes' load on fabric
  // links is at most the step's bound for them (link_load.h), with rounds the
  // class takes no more rounds than that bound (rounds.h), and every flow got
  // a port (replanning as the full plan would). Anything else plans the
  // class again from all ports_per_pair, as if the try had never run (only
  // used_mask_, a filter, keeps its bits). Not on a 3-tier Clos: at 65,536
  // endpoints (bench/clos3_bench.cc) 25 of its 45 cross-leaf classes miss
  // the bound from 16 or 32 ports, and the tries cost more than the kept
  // ones save (bench/results/2026-11-27-planner-fewer-ports.md).
  Status plan_class_fewer_first(size_t c, PlanStats& stats) {
    const std::vector<int>& ids = classes_[c];
    if (first_ports(c) != opt_.ports_per_pair) {
      const Step& step = s_.steps[static_cast<size_t>(flows_[static_cast<size_t>(ids.front())].steps.front())];
      // The fabric links' bound: with rounds, also the fewest rounds the step
      // can take (one flow per link and round).
      const int bound = std::max(1, step_fabric_lower_bound(f_, order_, step));
      PlanStats tried = stats;
      WEFT_ASSIGN_OR_RETURN(bool kept, plan_class(c, opt_.first_ports, tried, bound));
      if (kept && rounds_ && fabric_load_ > 1) {  // is the bound met in rounds too? (the paths decide: rounds.h)
        RoundAssigner assigner(2 * static_cast<int>(f_.links.size()));
        std::vector<int> round;
        if (planner_internal::class_rounds(f_, Chosen{flows_, path_pool_, classes_, step_ids_}, ids, assigner, round) >
            bound) {
          give_back_class(ids);
          kept = false;
        }
      }
      if (kept) {
        stats = tried;
        return ok_status();
      }
      for (int id : ids) flows_[static_cast<size_t>(id)].struck = 0;
    }
    WEFT_ASSIGN_OR_RETURN(const bool planned, plan_class(c, opt_.ports_per_pair, stats, -1));
    (void)planned;  // always, when not a try
    return ok_status();
  }

  // The ports per pair class c is planned from first.
  int first_ports(size_t c) const {
    return opt_.first_ports > 0 && opt_.first_ports < opt_.ports_per_pair && filter_.two_tier() &&
                   !classes_[c].empty()
               ? opt_.first_ports
               : opt_.ports_per_pair;
  }

  // Class c's candidates from `ports` ports per pair (planner_internal.h,
  // CandidateFetcher): fetched ahead on the worker, else here; then class
  // c + 1's are started on the worker (while this one is evaluated and
  // coloured), this one's routes are evaluated, and those whose ports
  // earlier classes took are struck. The table is asked from one thread at a time,
  // and each class's candidates are what a fetch here would give: plans do
  // not depend on second_thread.
  Status candidates(size_t c, int ports) {
    CandidateFetcher& mine = fetchers_[c % 2];
    CandidateFetcher& next = fetchers_[(c + 1) % 2];
    cands_ = nullptr;  // until this class's store is evaluated
    mine.join();
    if (mine.cls == static_cast<int>(c) && mine.ports == ports && mine.unevaluated()) {
      WEFT_RETURN_IF_ERROR(mine.status());
    } else {
      next.join();
      WEFT_RETURN_IF_ERROR(mine.fetch(inputs_, flows_, classes_[c], ports, static_cast<int>(c)));
    }
    if (second_thread_ && c + 1 < classes_.size() && classes_[c + 1].size() >= kFetchAheadFlows &&
        !(next.cls == static_cast<int>(c + 1) && next.ports == first_ports(c + 1) && next.unevaluated())) {
      next.fetch_async(inputs_, flows_, classes_[c + 1], first_ports(c + 1), static_cast<int>(c + 1));
    }
    mine.evaluate(inputs_, flows_, classes_[c]);
    cands_ = &mine.store;
    for (int id : classes_[c]) {
      FlowInfo& fi = flows_[static_cast<size_t>(id)];
      if (!in_nic(fi)) strike_taken(fi);
    }
    return ok_status();
  }

  // Undoes a kept try: its flows' ports, QPNs and paths (the class's paths
  // are the last in the pool).
  void give_back_class(const std::vector<int>& ids) {
    release(class_taken_);
    path_pool_.resize(class_path_at_);
    for (int id : ids) flows_[static_cast<size_t>(id)].path_len = 0;
  }
  void release(const std::vector<std::pair<int, uint16_t>>& taken) {
    for (const auto& [host, p] : taken) {
      auto& used = used_[static_cast<size_t>(host)];
      used.erase(std::find(used.begin(), used.end(), p));
    }
    for (const auto& [rank, q] : taken_qpns_) {
      auto& used = used_qpns_[static_cast<size_t>(rank)];
      used.erase(std::find(used.begin(), used.end(), q));
    }
  }

  // Plans the class from `ports` ports per pair. A try (try_bound >= 0)
  // gives up, leaving no port taken, where the full plan might do better
  // (plan_class_fewer_first) and returns false.
  Result<bool> plan_class(size_t c, int ports, PlanStats& stats, int try_bound) {
    const std::vector<int>& ids = classes_[c];
    const bool trying = trying_ = try_bound >= 0;
    WEFT_RETURN_IF_ERROR(candidates(c, ports));
    std::vector<std::pair<int, uint16_t>> taken;
    for (int attempt = 0;; ++attempt) {
      fabric_load_ = 0;
      const Status chosen = choose_routes(ids, stats);
      if (trying && (!chosen.is_ok() || fabric_load_ > try_bound)) return false;
      WEFT_RETURN_IF_ERROR(chosen);
      taken.clear();
      taken_qpns_.clear();
      const FlowInfo* starved = nullptr;
      for (int id : ids) {
        if (!take_port(flows_[static_cast<size_t>(id)], taken)) starved = &flows_[static_cast<size_t>(id)];
      }
      if (!starved) {
        class_path_at_ = path_pool_.size();
        class_taken_.swap(taken);
        for (int id : ids) {
          FlowInfo& fi = flows_[static_cast<size_t>(id)];
          if (in_nic(fi)) {
            const int leaf = f_.nic_switch(fi.src_nic);
            set_path(fi, std::span<const int>(&leaf, 1));
          } else {
            set_path(fi, cands_->route(fi.ci, static_cast<size_t>(fi.route)));
          }
        }
        return true;
      }
      release(taken);
      ++stats.replans;
      if (attempt >= 16) return trying ? Result<bool>(false) : failed_precondition(starved_message(*starved));
    }
  }

  // Chosen routes live in one pool (a vector per flow costs an allocation
  // each, ~10^6 of them at 65,536 endpoints).
  void set_path(FlowInfo& fi, std::span<const int> rt) {
    fi.path_at = static_cast<uint32_t>(path_pool_.size());
    fi.path_len = static_cast<uint32_t>(rt.size());
    path_pool_.insert(path_pool_.end(), rt.begin(), rt.end());
  }

  const topo::Fabric& f_;
  const ranking::RankOrder& order_;
  const Schedule& s_;
  PathTable& table_;
  const PlannerOptions& opt_;
  std::vector<uint16_t> dports_;
  QpnPool qpns_;  // per rank (E-ECMP), else empty
  std::vector<std::vector<uint32_t>> used_qpns_;        // per rank: QPNs a flow into it holds (E-ECMP)
  std::vector<std::pair<int, uint32_t>> taken_qpns_;    // this attempt's, to give back on a replan
  std::string table_name_;  // table_.describe(), asked once: later the second thread may be asking it
  // NCCL's QPs all run at once and the plugin has no way to sequence
  // them, so nccl-ring plans never have rounds; its steps' bound counts
  // the C x Q QPs on every access link, which the colouring (K flows per
  // spine link, list_edge_coloring.h) meets without them.
  const bool rounds_ = opt_.rounds && s_.collective != Collective::kNcclRing;
  RouteFilter filter_;
  std::optional<Clos3Colorer> colorer3_;
  std::vector<Clos3Flow> flows3_;
  std::vector<Clos3Key> keys3_;
  std::vector<FlowInfo> flows_;
  std::vector<int> class_of_;
  std::vector<std::vector<int>> classes_;
  std::vector<std::vector<int>> step_ids_;  // per step: its flows, in the step's order
  std::vector<std::vector<uint16_t>> used_;  // per host: source ports in use
  std::vector<int> host_flows_;              // per host: flows it sends (each needs a port of its own)
  std::vector<uint64_t> used_mask_;          // per host: port_bit() of the ports in used_
  std::vector<char> free_on_;                // strike_taken: per route, a port not yet used
  std::vector<std::pair<int, uint16_t>> class_taken_;  // (host, port) the last class planned took
  size_t class_path_at_ = 0;                            // and where its paths start in path_pool_
  bool trying_ = false;   // the class is planned from first_ports (plan_class_fewer_first)
  int fabric_load_ = 0;   // its routes' max load on fabric links (choose_routes)
  CandidateStore* cands_ = nullptr;  // the class being planned: a store of fetchers_
  std::vector<ListEdge> edges_;
  std::vector<RouteChoice> choices_;
  std::vector<std::vector<int>> route_ids_;
  std::vector<int> path_pool_;
  const FetchInputs inputs_{f_, table_, opt_, dports_, qpns_, host_flows_, filter_};
  // Where the machine has a second CPU (PlannerOptions::second_thread).
  const bool second_thread_ = opt_.second_thread && std::thread::hardware_concurrency() > 1;
  // Candidates, by class parity (candidates()). Last: destroyed first, so a
  // fetch still running (each waits for its own) ends before what it reads.
  std::array<CandidateFetcher, 2> fetchers_;
};

}  // namespace

Result<PlannedRoutes> plan_routes(const topo::Fabric& f, const ranking::RankOrder& order, const Schedule& s,
                                  PathTable& table, const PlannerOptions& opt) {
  if (order.size() != s.ranks) {
    return invalid_argument(fmt::format("the rank order has {} ranks but the schedule is for {}", order.size(), s.ranks));
  }
  if (&table.fabric() != &f) return invalid_argument("the path table describes another fabric");
  WEFT_RETURN_IF_ERROR(ranking::validate_order(f, order));
  WEFT_RETURN_IF_ERROR(validate(opt, f, order));
  if (s.collective == Collective::kNcclRing) WEFT_RETURN_IF_ERROR(validate_nccl_ring(f, order, opt));
  WEFT_ASSIGN_OR_RETURN(auto dports, listen_ports(f, order, opt));
  WEFT_RETURN_IF_ERROR(validate_qpns(table, opt, s.ranks));
  return Planner(f, order, s, table, opt, std::move(dports), table.hashes_qpn() ? opt.qpns : QpnPool{}).run();
}

}  // namespace weft::routing
