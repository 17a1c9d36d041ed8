#include "weft/routing/plan_router.h"

#include <algorithm>

#include <fmt/format.h>

#include "source_index.h"
#include "weft/routing/planes.h"

namespace weft::routing {
namespace {

// Checks that the plan's flows sit where the order runs their ranks.
Status check_against_order(const topo::Fabric& f, const ranking::RankOrder& order, const RoutePlan& plan) {
  if (plan.ranks != order.size()) {
    return invalid_argument(fmt::format("the plan is for {} ranks but the rank order has {}", plan.ranks, order.size()));
  }
  auto at = [&](int rank, int nic_index, const std::string& host, const std::string& nic, const char* end) -> Status {
    const auto& n = f.nics[static_cast<size_t>(nic_index)];
    const std::string& h = f.hosts[static_cast<size_t>(n.host)].name;
    if (h != host || (!nic.empty() && nic != n.name)) {
      return invalid_argument(fmt::format("plan flow {} rank {} is on '{}{}{}' but the rank order runs it on '{}:{}'",
                                          end, rank, host, nic.empty() ? "" : ":", nic, h, n.name));
    }
    return ok_status();
  };
  for (size_t i = 0; i < plan.flows.size(); ++i) {
    const PlanFlow& fl = plan.flows[i];
    if (fl.src_rank < 0 || fl.src_rank >= plan.ranks || fl.dst_rank < 0 || fl.dst_rank >= plan.ranks) {
      return invalid_argument(fmt::format("plan flow {} (rank {} -> {}) names a rank outside the plan's {}", i,
                                          fl.src_rank, fl.dst_rank, plan.ranks));
    }
    // The destination end is the NIC port the flow arrives at (planes.h):
    // the destination rank's own port, or its NIC's port on the source's plane.
    const int s = order.nics[static_cast<size_t>(fl.src_rank)];
    const int d = order.nics[static_cast<size_t>(fl.dst_rank)];
    const int arrives = plane_carrier(f, s, d);
    WEFT_RETURN_IF_ERROR(at(fl.src_rank, s, fl.src_host, fl.src_nic, "source"));
    WEFT_RETURN_IF_ERROR(at(fl.dst_rank, arrives >= 0 ? arrives : d, fl.dst_host, fl.dst_nic, "destination"));
  }
  return ok_status();
}

// A plan flow's path: none for a flow between two ports of one NIC (planes.h).
Result<Path> plan_flow_path(const PathFinder& pf, const topo::Fabric& f, const ranking::RankOrder& order,
                            const PlanFlow& fl, std::span<const int> route) {
  const int s = order.nics[static_cast<size_t>(fl.src_rank)];
  const int d = plane_carrier(f, s, order.nics[static_cast<size_t>(fl.dst_rank)]);
  if (d == s) return Path{};
  if (d < 0) return routed_nics(f, order, Flow{.src = fl.src_rank, .dst = fl.dst_rank}).status();
  WEFT_RETURN_IF_ERROR(check_flow_access(f, Flow{.src = fl.src_rank, .dst = fl.dst_rank}, s, d));
  return route_path(pf, s, d, route);
}

// Each plan flow's path as directed links in one pool, the flows found by
// source rank (source_index.h): a hash map of 10^6 flows, each with a
// vector, cost an allocation per flow. Of two flows with one FlowId the
// first answers.
class PathsRouter final : public Router {
 public:
  PathsRouter(std::string_view name, const RoutePlan& plan) : name_(name) {
    by_src_.build(static_cast<size_t>(plan.ranks), plan.flows.size(), [&](size_t i) { return plan.flows[i].src_rank; });
    to_.reserve(plan.flows.size());
    for (const PlanFlow& fl : plan.flows) to_.push_back({fl.dst_rank, fl.conn, fl.qp});
    at_.reserve(plan.flows.size() + 1);
    at_.push_back(0);
  }
  // Plan flow i's path, for i = 0, 1, ... in turn.
  void add(const Path& p) {
    pool_.insert(pool_.end(), p.dlinks.begin(), p.dlinks.end());
    at_.push_back(static_cast<uint32_t>(pool_.size()));
  }

  std::string_view name() const override { return name_; }
  Status route_step(const Step& step, int step_index, std::vector<Path>& paths) override {
    for (size_t i = 0; i < step.flows.size(); ++i) {
      const Flow& fl = step.flows[i];
      const auto mine = by_src_.of(fl.src);
      const auto it = std::find_if(mine.begin(), mine.end(), [&](uint32_t k) {
        return to_[k].dst == fl.dst && to_[k].conn == fl.conn && to_[k].qp == fl.qp;
      });
      if (it == mine.end()) {
        return not_found(fl.conn == 0 && fl.qp == 0
                             ? fmt::format("the plan has no flow {} -> {} (step {})", fl.src, fl.dst, step_index)
                             : fmt::format("the plan has no flow {} -> {} conn {} qp {} (step {})", fl.src, fl.dst,
                                           fl.conn, fl.qp, step_index));
      }
      paths[i].dlinks.assign(pool_.begin() + at_[*it], pool_.begin() + at_[*it + 1]);
    }
    return ok_status();
  }

 private:
  struct To {
    int dst = 0, conn = 0, qp = 0;
  };
  std::string_view name_;
  SourceIndex by_src_;
  std::vector<To> to_;        // per plan flow: where it goes, on which connection and QP
  std::vector<int> pool_;     // directed links of every flow's path
  std::vector<uint32_t> at_;  // flow i's: pool_[at_[i], at_[i + 1])
};

}  // namespace

Result<std::unique_ptr<Router>> make_plan_router(const topo::Fabric& f, const ranking::RankOrder& order,
                                                 const RoutePlan& plan) {
  WEFT_RETURN_IF_ERROR(check_against_order(f, order, plan));
  PathFinder pf(f);
  auto paths = std::make_unique<PathsRouter>("plan", plan);
  Route r;
  for (size_t i = 0; i < plan.flows.size(); ++i) {
    const auto& fl = plan.flows[i];
    r.clear();
    for (const auto& name : fl.path) {
      auto sw = f.find_switch(name);
      if (!sw) return invalid_argument(fmt::format("plan flow {}: unknown switch '{}' in its path", i, name));
      r.push_back(*sw);
    }
    auto p = plan_flow_path(pf, f, order, fl, r);
    if (!p) return p.status().with_context(fmt::format("plan flow {}", i));
    paths->add(*p);
  }
  return std::unique_ptr<Router>(std::move(paths));
}

Result<std::unique_ptr<Router>> make_table_router(const topo::Fabric& f, const ranking::RankOrder& order,
                                                  const RoutePlan& plan, PathTable& table) {
  WEFT_RETURN_IF_ERROR(check_against_order(f, order, plan));
  PathFinder pf(f);
  auto paths = std::make_unique<PathsRouter>("table", plan);
  for (size_t i = 0; i < plan.flows.size(); ++i) {
    const auto& fl = plan.flows[i];
    const int s = order.nics[static_cast<size_t>(fl.src_rank)];
    const int d = plane_carrier(f, s, order.nics[static_cast<size_t>(fl.dst_rank)]);
    if (d == s) {  // in-NIC: no path (planes.h)
      paths->add(Path{});
      continue;
    }
    if (d < 0) return plan_flow_path(pf, f, order, fl, {}).status().with_context(fmt::format("plan flow {}", i));
    if (auto st = check_flow_access(f, Flow{.src = fl.src_rank, .dst = fl.dst_rank}, s, d); !st) {
      return st.with_context(fmt::format("plan flow {}", i));
    }
    FlowKey k{s, d, fl.protocol == "tcp" ? kProtoTcp : kProtoUdp, fl.sport, fl.dport, fl.dqpn};
    auto r = table.route(k);
    if (!r) return r.status().with_context(fmt::format("plan flow {} (sport {})", i, fl.sport));
    auto p = route_path(pf, s, d, *r);
    if (!p) return p.status().with_context(fmt::format("plan flow {} (sport {})", i, fl.sport));
    paths->add(*p);
  }
  return std::unique_ptr<Router>(std::move(paths));
}

}  // namespace weft::routing
