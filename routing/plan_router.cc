#include "weft/routing/plan_router.h"

#include <unordered_map>

#include <fmt/format.h>

#include "weft/routing/planes.h"

namespace weft::routing {
namespace {

FlowId key_of(const PlanFlow& f) { return {f.src_rank, f.dst_rank, f.conn, f.qp}; }
using PathMap = std::unordered_map<FlowId, Path, FlowIdHash>;

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
  for (const auto& fl : plan.flows) {
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
  return route_path(pf, s, d, route);
}

class PathsRouter final : public Router {
 public:
  PathsRouter(std::string_view name, PathMap paths)
      : name_(name), paths_(std::move(paths)) {}
  std::string_view name() const override { return name_; }
  Status route_step(const Step& step, int step_index, std::vector<Path>& paths) override {
    for (size_t i = 0; i < step.flows.size(); ++i) {
      const Flow& fl = step.flows[i];
      auto it = paths_.find(flow_id(fl));
      if (it == paths_.end()) {
        return not_found(fl.conn == 0 && fl.qp == 0
                             ? fmt::format("the plan has no flow {} -> {} (step {})", fl.src, fl.dst, step_index)
                             : fmt::format("the plan has no flow {} -> {} conn {} qp {} (step {})", fl.src, fl.dst,
                                           fl.conn, fl.qp, step_index));
      }
      paths[i] = it->second;
    }
    return ok_status();
  }

 private:
  std::string_view name_;
  PathMap paths_;
};

}  // namespace

Result<std::unique_ptr<Router>> make_plan_router(const topo::Fabric& f, const ranking::RankOrder& order,
                                                 const RoutePlan& plan) {
  WEFT_RETURN_IF_ERROR(check_against_order(f, order, plan));
  PathFinder pf(f);
  PathMap paths;
  paths.reserve(plan.flows.size());
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
    paths.emplace(key_of(fl), std::move(*p));
  }
  return std::unique_ptr<Router>(std::make_unique<PathsRouter>("plan", std::move(paths)));
}

Result<std::unique_ptr<Router>> make_table_router(const topo::Fabric& f, const ranking::RankOrder& order,
                                                  const RoutePlan& plan, PathTable& table) {
  WEFT_RETURN_IF_ERROR(check_against_order(f, order, plan));
  PathFinder pf(f);
  PathMap paths;
  paths.reserve(plan.flows.size());
  for (size_t i = 0; i < plan.flows.size(); ++i) {
    const auto& fl = plan.flows[i];
    const int s = order.nics[static_cast<size_t>(fl.src_rank)];
    const int d = plane_carrier(f, s, order.nics[static_cast<size_t>(fl.dst_rank)]);
    if (d == s) {  // in-NIC: no path (planes.h)
      paths.emplace(key_of(fl), Path{});
      continue;
    }
    if (d < 0) return plan_flow_path(pf, f, order, fl, {}).status().with_context(fmt::format("plan flow {}", i));
    FlowKey k{s, d, fl.protocol == "tcp" ? kProtoTcp : kProtoUdp, fl.sport, fl.dport, fl.dqpn};
    auto r = table.route(k);
    if (!r) return r.status().with_context(fmt::format("plan flow {} (sport {})", i, fl.sport));
    auto p = route_path(pf, s, d, *r);
    if (!p) return p.status().with_context(fmt::format("plan flow {} (sport {})", i, fl.sport));
    paths.emplace(key_of(fl), std::move(*p));
  }
  return std::unique_ptr<Router>(std::make_unique<PathsRouter>("table", std::move(paths)));
}

}  // namespace weft::routing
