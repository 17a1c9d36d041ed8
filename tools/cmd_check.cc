// weft check: the link load of every step of a collective under a rank order.
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "load_table.h"
#include "weft/ranking/rank_file.h"
#include "weft/routing/hybrid_schedule.h"
#include "weft/routing/link_load.h"
#include "weft/routing/multi_connection.h"
#include "weft/routing/plan_router.h"
#include "weft/topology/topology_file.h"

namespace weft::cli {
namespace {

struct CheckArgs {
  std::string topology;
  std::string ranks;
  std::string collective = "allreduce-hd";
  std::string routes = "ideal";
  std::string plan;
  std::string size = "64MiB";
  uint32_t seed = 1;
  std::string hash = "crc32";  // ecmp routes: the switches' model (routing/weft/routing/ecmp.h make_hash)
  bool json = false;
  std::optional<int> channels;  // nccl-ring (cli_common.h)
  std::optional<int> qps;
};

std::string report_json(const topo::Fabric& f, const routing::LoadReport& rep) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : rep.steps) {
    steps.push_back({{"step", s.step},
                     {"phase", s.phase},
                     {"distance", s.distance},
                     {"repeat", s.repeat},
                     {"flows", s.flows},
                     {"fabric_flows", s.fabric_flows},
                     {"multi_hop_flows", s.multi_hop_flows},
                     {"max_load", s.max_load},
                     {"max_fabric_load", s.max_fabric_load},
                     {"max_bytes", s.max_bytes},
                     {"lower_bound", s.lower_bound},
                     {"fabric_lower_bound", s.fabric_lower_bound},
                     {"rounds", s.rounds},
                     {"single_round_bound", s.single_round_bound},
                     {"cross_rail_flows", s.cross_rail_flows},
                     {"cross_plane_flows", s.cross_plane_flows}, {"in_nic_flows", s.in_nic_flows},
                     {"rail_max_load", s.rail_max_load},
                     {"plane_max_load", s.plane_max_load},
                     {"hottest", s.hottest >= 0 ? f.directed_name(s.hottest) : ""}});
  }
  nlohmann::json root = {{"max_load", rep.max_load}, {"max_lower_bound", rep.max_lower_bound},
                         {"max_rounds", rep.max_rounds}, {"cross_plane_flows", rep.cross_plane_flows},
                         {"steps", steps}};
  return root.dump(2) + "\n";
}

int run_check(const CheckArgs& a) {
  auto coll = collective_option(a.collective);
  if (!coll) return fail(coll.status());
  auto shape = nccl_ring_shape(a.collective, a.channels, a.qps);
  if (!shape) return fail(shape.status());
  if (a.routes != "ideal" && a.routes != "ecmp" && a.routes != "plan") {
    return fail(invalid_argument(fmt::format("unknown --routes '{}' (ideal, ecmp, plan)", a.routes)));
  }
  if (auto h = routing::make_hash(a.hash, a.seed); !h) return fail(h.status());
  if ((a.routes == "plan") != !a.plan.empty()) {
    return fail(invalid_argument("--routes plan and --plan FILE go together"));
  }
  auto bytes = parse_size(a.size);
  if (!bytes || *bytes % 4 != 0) return fail(invalid_argument(fmt::format("bad --size '{}' (a multiple of 4 bytes, e.g. 64MiB)", a.size)));
  auto fabric = topo::load_topology(a.topology);
  if (!fabric) return fail(fabric.status());
  auto order = ranking::load_rank_file(*fabric, a.ranks);
  if (!order) return fail(order.status());
  std::optional<routing::RoutePlan> plan;
  if (a.routes == "plan") {
    auto loaded = routing::load_plan(a.plan);
    if (!loaded) return fail(loaded.status());
    plan = std::move(*loaded);
    if (plan->collective != a.collective) {
      return fail(invalid_argument(fmt::format("{}: the plan is for {}, not --collective {}", a.plan, plan->collective,
                                               a.collective)));
    }
    // An nccl-ring plan's flows are per channel and QP: its shape is the
    // plan's unless --channels / --qps say otherwise (then they must agree).
    if (*coll == routing::Collective::kNcclRing) {
      routing::NcclRingShape in_plan{1, 1};
      for (const auto& f : plan->flows) {
        in_plan.channels = std::max(in_plan.channels, f.conn + 1);
        in_plan.qps = std::max(in_plan.qps, f.qp + 1);
      }
      if ((a.channels && *a.channels != in_plan.channels) || (a.qps && *a.qps != in_plan.qps)) {
        return fail(invalid_argument(fmt::format(
            "{}: the plan has {} channel(s) of {} QP(s) per connection; {} differ{} (leave them out to check the "
            "plan's)",
            a.plan, in_plan.channels, in_plan.qps,
            a.channels && a.qps ? fmt::format("--channels {} --qps {}", *a.channels, *a.qps)
                                : a.channels ? fmt::format("--channels {}", *a.channels) : fmt::format("--qps {}", *a.qps),
            a.channels && a.qps ? "" : "s")));
      }
      *shape = in_plan;
    }
  }
  auto sched = routing::build_fabric_schedule(*fabric, *order, *coll, *bytes / 4, 4, *shape);
  if (!sched) return fail(sched.status());
  std::unique_ptr<routing::Router> router;
  if (plan) {
    if (*coll != routing::Collective::kNcclRing && routing::plan_connections(*plan) > 1) {
      // `weft route --qps-per-connection`: a flow per connection.
      auto split = routing::with_connections(*sched, routing::plan_connections(*plan));
      if (!split) return fail(split.status().with_context(a.plan));
      *sched = std::move(*split);
    }
    auto r = routing::make_plan_router(*fabric, *order, *plan);
    if (!r) return fail(r.status().with_context(a.plan));
    // A plan's rounds are time slices: load is counted per round.
    if (auto st = routing::apply_plan_rounds(*plan, *sched); !st) return fail(st.with_context(a.plan));
    router = std::move(*r);
  } else if (a.routes == "ideal") {
    router = routing::make_ideal_router(*fabric, *order);
  } else {
    auto r = routing::make_ecmp_router(*fabric, *order, {.hash = a.hash, .seed = a.seed});
    if (!r) return fail(r.status());
    router = std::move(*r);
  }
  auto rep = routing::check_link_load(*fabric, *order, *sched, *router);
  if (!rep) return fail(rep.status());
  if (a.json) {
    fmt::print("{}", report_json(*fabric, *rep));
  } else {
    fmt::print("{} on {} ranks, {} routes, {} per rank\n", a.collective, order->size(), a.routes,
               format_bytes(static_cast<double>(*bytes)));
    fmt::print("{}", format_load_table(*fabric, *rep));
  }
  if (rep->cross_plane_flows > 0) {
    return fail(failed_precondition(fmt::format(
        "{} flows cross planes, which share no switch, so they have no route (first: {}); a flow rides its source "
        "port's plane to the destination NIC's port on it, so give every NIC a port on every plane",
        rep->cross_plane_flows, rep->first_cross_plane)));
  }
  return 0;
}

}  // namespace

void register_check(CLI::App& app, Registry& reg) {
  static CheckArgs a;
  auto* cmd = app.add_subcommand(
      "check",
      "Count the flows on every directed link in every step of a collective and print\n"
      "the maximum load per step beside its lower bound. Routes: 'ideal' = the best\n"
      "spine per flow (exact König colouring on a 2-tier Clos); 'ecmp' = random\n"
      "ephemeral ports hashed by the switches (what an unplanned fabric does); 'plan' =\n"
      "the paths of a route plan from weft route (--plan FILE).");
  cmd->add_option("--topology", a.topology, "Topology file")->required();
  cmd->add_option("--ranks", a.ranks, "Rank file (any weft rank --format; detected)")->required();
  cmd->add_option("--collective", a.collective, "allreduce-hd|allreduce-ring|allreduce-hybrid|nccl-ring")->capture_default_str();
  add_nccl_ring_options(*cmd, a.channels, a.qps);
  cmd->add_option("--routes", a.routes, "ideal|ecmp|plan")->capture_default_str();
  cmd->add_option("--plan", a.plan, "Route plan to replay (with --routes plan)");
  cmd->add_option("--size", a.size, "Bytes per rank (K, M, G suffixes)")->capture_default_str();
  cmd->add_option("--seed", a.seed, "ECMP hash and port seed")->capture_default_str();
  cmd->add_option("--hash", a.hash,
                  "ecmp routes: the switches' model, crc32|crc32-qp|linux-l4|linux-l3 (crc32-qp: E-ECMP, the RoCE "
                  "destination QP hashed too, a random QPN per connection). A plan's paths are checked as written "
                  "(weft route looked them up with its dqpn)")
      ->capture_default_str();
  cmd->add_flag("--json", a.json, "Print the report as JSON");
  cmd->callback([&reg] { reg.run = [] { return run_check(a); }; });
}

}  // namespace weft::cli
