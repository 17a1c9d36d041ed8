// weft route: a rank order + a collective -> a route plan (a source port and a
// path per directed flow), verified by the link-load checker before writing.
#include <chrono>
#include <charconv>
#include <future>
#include <optional>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "cli_common.h"
#include "path_source.h"
#include "weft/ranking/rank_file.h"
#include "weft/routing/hybrid_schedule.h"
#include "weft/routing/link_load.h"
#include "weft/routing/multi_connection.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/topology/topology_file.h"

namespace weft::cli {

Result<routing::PortRange> parse_port_range(const std::string& s) {
  const auto dash = s.find('-');
  int lo = 0, hi = 0;
  auto num = [](std::string_view t, int& v) {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return ec == std::errc() && p == t.data() + t.size() && !t.empty();
  };
  if (dash == std::string::npos || !num(std::string_view(s).substr(0, dash), lo) ||
      !num(std::string_view(s).substr(dash + 1), hi)) {
    return invalid_argument(fmt::format("bad port range '{}' (LO-HI, e.g. 49152-65535)", s));
  }
  return routing::make_port_range(lo, hi);
}

namespace {

// Jobs this large take a noticeable moment: say what is going on.
constexpr int kProgressRanks = 4096;

struct RouteArgs {
  std::string topology;
  std::string ranks;
  std::string collective = "allreduce-hd";
  std::string paths = "model";
  ModelSpec model;
  std::string protocol = "udp";
  std::string sports = "49152-65535";
  int ports_per_pair = 0;  // 0: 64 from a model, every probed port (up to 1024) from a database
  std::optional<int> dport;  // tcp only (udp is RoCE v2: 4791); 29500 when not given
  bool no_rounds = false;
  bool one_thread = false;
  std::optional<int> channels;  // nccl-ring (cli_common.h)
  std::optional<int> qps;
  int qps_per_connection = 1;  // TCP connections per directed pair (multi_connection.h)
  std::string qpn_pool;        // E-ECMP: per rank the QPNs it published (qpn_pool.h)
  std::string out;
};

// Every ranked NIC's IPv4 address: the NCCL plugin finds its QPs' flows by
// address (docs/nccl.md), so an nccl-ring plan without them is useless.
Status check_addresses(const topo::Fabric& f, const ranking::RankOrder& order) {
  for (size_t r = 0; r < order.nics.size(); ++r) {
    const auto& nic = f.nics[static_cast<size_t>(order.nics[r])];
    if (nic.address.empty()) {
      return invalid_argument(fmt::format("nccl-ring: rank {}'s NIC {} has no address in the topology (nics[].address): "
                                          "the NCCL plugin finds a QP's flow by its NICs' IPv4 addresses",
                                          r, f.nic_qualified_name(order.nics[r])));
    }
  }
  return ok_status();
}

// --qps-per-connection: TCP connections the library stripes over, so tcp
// only, and not nccl-ring (its QPs are --qps).
Status connections_allowed(const RouteArgs& a, routing::Collective coll) {
  WEFT_RETURN_IF_ERROR(routing::validate_connections_per_pair(a.qps_per_connection).with_context("--qps-per-connection"));
  if (a.qps_per_connection == 1) return ok_status();
  if (coll == routing::Collective::kNcclRing) {
    return invalid_argument("--qps-per-connection: nccl-ring plans the plugin's QPs with --qps");
  }
  if (a.protocol != "tcp") {
    return invalid_argument(fmt::format("--qps-per-connection {} needs --protocol tcp: it plans the TCP transport's "
                                        "connections_per_peer connections",
                                        a.qps_per_connection));
  }
  return ok_status();
}

int run_route(const RouteArgs& a) {
  auto coll = collective_option(a.collective);
  if (!coll) return fail(coll.status());
  auto shape = nccl_ring_shape(a.collective, a.channels, a.qps);
  if (!shape) return fail(shape.status());
  if (auto st = connections_allowed(a, *coll); !st) return fail(st);
  auto range = parse_port_range(a.sports);
  if (!range) return fail(range.status().with_context("--sport-range"));
  if (a.dport && a.protocol != "tcp") {
    return fail(invalid_argument(fmt::format("--dport is for --protocol tcp: {} flows go to RoCE v2's port 4791",
                                             a.protocol)));
  }
  const int dport = a.dport.value_or(29500);
  if (dport < 1 || dport > 65535) return fail(invalid_argument(fmt::format("--dport {} is not a port (1-65535)", dport)));
  if (a.ports_per_pair < 0) return fail(invalid_argument("--ports-per-pair must be >= 1 (0 = auto)"));
  // A database knows only the ports it probed: offer the planner all of them
  // (a targeted campaign gathers per spine as many as a host has flows).
  const int model_ports = routing::nccl_ring_ports_per_pair(*shape, 64);  // 64 for the other collectives
  const int ports_per_pair = a.ports_per_pair > 0 ? a.ports_per_pair : a.paths == "model" ? model_ports : kDbPortsPerPair;
  routing::PlannerOptions opt{.protocol = a.protocol,
                              .sports = *range,
                              .ports_per_pair = ports_per_pair,
                              .tcp_dport = static_cast<uint16_t>(dport),
                              .rounds = !a.no_rounds && a.qps_per_connection == 1,
                              .second_thread = !a.one_thread};
  auto fabric = topo::load_topology(a.topology);
  if (!fabric) return fail(fabric.status());
  auto order = ranking::load_rank_file(*fabric, a.ranks);
  if (!order) return fail(order.status());
  if (auto st = routing::validate(opt, *fabric, *order); !st) return fail(st);
  if (*coll == routing::Collective::kNcclRing) {
    if (auto st = routing::validate_nccl_ring(*fabric, *order, opt); !st) return fail(st);
    if (auto st = check_addresses(*fabric, *order); !st) return fail(st);
  }
  auto table = open_path_table(*fabric, a.paths, a.model);
  if (!table) return fail(table.status());
  if (!a.qpn_pool.empty()) {
    if (!(*table)->hashes_qpn()) return fail(routing::refuse_qpn_pool(**table));
    auto pool = routing::load_qpn_pool(a.qpn_pool, order->size());
    if (!pool) return fail(pool.status().with_context("--qpn-pool"));
    opt.qpns = std::move(*pool);
  }
  if (auto st = routing::validate_qpns(**table, opt, order->size()); !st) return fail(st);
  // Flows per step are fixed by the schedule; bytes do not change the plan.
  auto sched = routing::build_fabric_schedule(*fabric, *order, *coll, 1024, 4, *shape);
  if (!sched) return fail(sched.status());
  auto split = routing::with_connections(*sched, a.qps_per_connection);
  if (!split) return fail(split.status().with_context("--qps-per-connection"));
  *sched = std::move(*split);
  // Large plans take seconds per stage: say what is being done.
  const bool progress = order->size() >= kProgressRanks;
  auto t0 = std::chrono::steady_clock::now();
  auto since = [&t0] {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - t0).count();
    t0 = now;
    return s;
  };
  if (progress) {
    fmt::print(stderr, "planning {} for {} ranks on {} ({} paths, {} ports per pair)...\n", a.collective,
               order->size(), fabric->name, (*table)->describe(), ports_per_pair);
  }
  auto planned = routing::plan_routes(*fabric, *order, *sched, **table, opt);
  if (!planned) return fail(planned.status());
  if (progress) {
    fmt::print(stderr, "planned {} flows in {:.1f} s; checking where the path table sends their ports and writing "
               "the plan...\n", planned->plan.flows.size(), since());
  }
  // Where the path table itself sends the planned ports, checked as well
  // (load per round, as the plan counts it). The check reads the plan and
  // the table and sets the schedule's rounds (read here only after it has
  // ended); the plan's text reads only the plan. On large plans both are
  // long (bench/results/2026-11-28-route-check-and-write.md), so the check
  // runs on a second thread where there is one, and the file is written
  // only once it has passed; on one thread it runs first.
  auto check = [&]() -> Status {
    WEFT_RETURN_IF_ERROR(routing::apply_plan_rounds(planned->plan, *sched));
    WEFT_ASSIGN_OR_RETURN(auto replay, routing::make_table_router(*fabric, *order, planned->plan, **table));
    WEFT_ASSIGN_OR_RETURN(auto rep, routing::check_link_load(*fabric, *order, *sched, *replay));
    for (size_t i = 0; i < rep.steps.size(); ++i) {
      if (rep.steps[i].max_load != planned->plan.steps[i].max_load) {
        return internal_error(fmt::format("step {}: the plan's paths give load {} but its ports hash to load {}", i,
                                          planned->plan.steps[i].max_load, rep.steps[i].max_load));
      }
    }
    return ok_status();
  };
  std::future<Status> checked;
  if (opt.second_thread && std::thread::hardware_concurrency() > 1) {
    try {
      checked = std::async(std::launch::async, check);
    } catch (const std::system_error&) {  // no thread to be had: checked below, here
    }
  }
  if (!checked.valid()) {
    if (auto st = check(); !st) return fail(st);
  }
  const std::string text = routing::plan_to_json(planned->plan);
  if (checked.valid()) {
    if (auto st = checked.get(); !st) return fail(st);
  }
  if (auto st = emit(a.out, text); !st) return fail(st);
  if (progress) fmt::print(stderr, "checked and written in {:.1f} s\n", since());
  const auto& s = planned->stats;
  fmt::print(stderr, "{:>4}  {:<7} {:>6}  {:>8} {:>6} {:>6}\n", "step", "phase", "flows", "max load", "bound", "rounds");
  for (size_t i = 0; i < planned->plan.steps.size(); ++i) {
    const auto& ps = planned->plan.steps[i];
    fmt::print(stderr, "{:>4}  {:<7} {:>6}  {:>8} {:>6} {:>6}{}\n", ps.step, ps.phase, sched->steps[i].flows.size(),
               ps.max_load, ps.lower_bound, ps.rounds, ps.max_load > ps.lower_bound ? "   <- above the bound" : "");
  }
  const std::string rounds =
      s.steps_in_rounds == 0
          ? ""
          : fmt::format("; {} step{} in up to {} rounds, load counted per round (one round would need {})", s.steps_in_rounds,
                        s.steps_in_rounds == 1 ? "" : "s", s.max_rounds, s.max_single_round_bound);
  fmt::print(stderr, "{} flows ({} cross leaves), max load {} (lower bound {}), {} of {} steps at the bound{}{}\n",
             s.flows, s.fabric_flows, s.max_load, s.max_lower_bound, s.steps_at_bound, s.steps, rounds,
             a.out.empty() || a.out == "-" ? "" : fmt::format("; wrote {}", a.out));
  return 0;
}

}  // namespace

void register_route(CLI::App& app, Registry& reg) {
  static RouteArgs a;
  auto* cmd = app.add_subcommand(
      "route",
      "Plan a source port for every directed flow of a collective so that each step's\n"
      "flows take distinct links, and write the route plan the collective library reads\n"
      "(docs/route-plan.md). On a 2-tier Clos each step is coloured with the spines\n"
      "(König; list colouring where a pair's ports reach only some spines); where load 1\n"
      "is impossible (failed links, fewer spines than hosts per leaf) the max load is\n"
      "minimised and printed beside its lower bound, then split into rounds (below). The\n"
      "plan is checked by the link-load\n"
      "checker, and its ports are looked up again in the path table, before it is written.\n"
      "Rounds: where a step's flows must share a link (a failed link leaves a leaf fewer\n"
      "uplinks than flows that leave it), the step is split into rounds, so that every link\n"
      "carries one flow at a time; the collective library makes a flow wait for the one\n"
      "before it on each of its links (docs/route-plan.md \"Rounds\"). A step in R rounds\n"
      "takes R times as long for its flows, the same as R flows sharing a link, but with no\n"
      "queue contention; where rounds would take longer than sharing (more rounds than the\n"
      "load, two flows at one port in a round on a multi-plane fabric, or access links slower\n"
      "than the shared link) the step runs at once. --no-rounds plans every such step with\n"
      "load > 1 instead.\n"
      "Listen ports: udp flows go to 4791 (RoCEv2); tcp rank r listens on --dport + k,\n"
      "k = how many ranks precede r on its host.\n"
      "NCCL (docs/nccl.md): --collective nccl-ring plans NCCL's inter-node ring for the weft\n"
      "NCCL net plugin: rank r -> r+1 on each of --channels channels is one connection of\n"
      "--qps QPs, each QP a udp flow on a port of its own, all at once (one step), with at\n"
      "most one QP per spine link where the fabric allows. It needs one rank per host and\n"
      "every NIC's address in the topology; run the job with WEFT_NCCL_QPS = --qps and\n"
      "NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS = --channels. Example:\n"
      "  weft route --topology fabric.json --ranks ranks.txt --collective nccl-ring \\\n"
      "      --channels 2 --qps 4 -o plan.json\n"
      "E-ECMP (--hash crc32-qp): the switches also hash the RoCEv2 destination QP, so each\n"
      "flow gets a (sport, dqpn) pair, dqpn one of its destination's QPNs (--qpn-pool); the\n"
      "collective library does not yet pick its QPs by a plan's dqpn (docs/route-plan.md).");
  cmd->add_option("--topology", a.topology, "Topology file")->required();
  cmd->add_option("--ranks", a.ranks, "Rank file (any weft rank --format; detected)")->required();
  cmd->add_option("--collective", a.collective, "allreduce-hd|allreduce-ring|allreduce-hybrid|nccl-ring")->capture_default_str();
  add_nccl_ring_options(*cmd, a.channels, a.qps);
  cmd->add_option("--paths", a.paths, "Where paths come from: 'model' (ECMP hash model) or a probe database file")
      ->capture_default_str();
  cmd->add_option("--hash", a.model.hash,
                  "Model: crc32|crc32-qp|linux-l4|linux-l3 (crc32-qp: E-ECMP, switches also hash the RoCE "
                  "destination QP; each udp flow gets a planned \"dqpn\")")
      ->capture_default_str();
  cmd->add_option("--seed", a.model.seed, "Model: switch hash seed (Linux: fib_multipath_hash_seed)")->capture_default_str();
  cmd->add_option("--protocol", a.protocol, "udp (RoCEv2) or tcp (one connection per direction)")->capture_default_str();
  cmd->add_option("--sport-range", a.sports,
                  "Source ports to choose from, LO-HI (udp, RoCE v2: within 49152-65535, flow label = port - 0xC000)")
      ->capture_default_str();
  cmd->add_option("--ports-per-pair", a.ports_per_pair,
                  "Candidate source ports per host pair (0 = 64 from the model, every probed port up to 1024 from a "
                  "database)")->capture_default_str();
  cmd->add_option("--dport", a.dport,
                  "tcp: listen port of each host's first rank (then +1 per rank on the host); default 29500");
  cmd->add_option("--qps-per-connection", a.qps_per_connection,
                  "tcp: Q connections per directed pair (the library's connections_per_peer = Q), each a flow on "
                  "a planned port of its own; 1..64. Q > 1 plans no rounds: a pair's connections run at once")
      ->capture_default_str();
  cmd->add_option("--qpn-pool", a.qpn_pool,
                  "--hash crc32-qp: JSON {\"qpns\": [[QPN, ...] per rank]}, the QPs each rank created for its "
                  "peers; each flow uses one of its destination's (default: a documented synthetic pool, "
                  "docs/route-plan.md \"E-ECMP\")");
  cmd->add_flag("--no-rounds", a.no_rounds, "Let flows share a link instead of splitting a step into rounds");
  cmd->add_flag("--one-thread", a.one_thread,
                "Plan on one CPU (default, where there are two or more: a second thread asks the path table for "
                "the next flow set's ports, checks the plan, and looks its ports up again while the file is "
                "made; the plan is the same)");
  cmd->add_option("-o,--output", a.out, "Plan file (default: stdout); never left half-written");
  cmd->callback([&reg] { reg.run = [] { return run_route(a); }; });
}

}  // namespace weft::cli
