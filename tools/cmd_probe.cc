// weft probe: the controller of a probe campaign (agents must be running).
#include <fmt/format.h>

#include <set>

#include "cli_common.h"
#include "fleet_args.h"
#include "path_source.h"
#include "weft/agent/control.h"
#include "weft/agent/controller.h"
#include "weft/common/file_util.h"
#include "weft/routing/schedule.h"

namespace weft::cli {
namespace {

struct ProbeArgs {
  FleetArgs fleet;
  std::string db = "fabric.db";
  agent::ProbeRunConfig cfg;
  int probe_dscp = 8;
  int dport = 0;
  std::string targeted;
  int spines = 0;
  bool ports_given = false;
  bool quiet = false;
};

// The directed pairs of a collective over the hosts in file order (rank i = host i).
Result<std::vector<std::pair<int, int>>> schedule_pairs(const std::string& name, int hosts) {
  auto coll = routing::parse_collective(name);
  if (!coll) return invalid_argument(fmt::format("unknown --targeted '{}' (allreduce-hd, allreduce-ring, nccl-ring)", name));
  WEFT_ASSIGN_OR_RETURN(routing::Schedule s, routing::build_schedule(*coll, hosts, static_cast<uint64_t>(hosts), 4));
  std::set<std::pair<int, int>> pairs;
  for (const auto& step : s.steps)
    for (const auto& f : step.flows) pairs.insert({f.src, f.dst});
  return std::vector<std::pair<int, int>>(pairs.begin(), pairs.end());
}

int run_probe(ProbeArgs& a) {
  auto fleet = load_fleet(a.fleet);
  if (!fleet) return fail(fleet.status());
  const std::vector<agent::HostEntry>* hosts = &fleet->hosts;
  const probe::MacKey* secret = &fleet->secret;
  if (a.probe_dscp < 0 || a.probe_dscp > 63) return fail(invalid_argument("--probe-dscp is 0..63 (6 bits)"));
  a.cfg.probe_dscp = static_cast<uint8_t>(a.probe_dscp);
  if (a.dport < 0 || a.dport > 65535) return fail(invalid_argument("--dport is 1..65535"));
  a.cfg.dport = static_cast<uint16_t>(a.dport ? a.dport : (a.cfg.backend == "tcp-syn" ? 5201 : 4791));
  if (!a.targeted.empty()) {
    if (a.spines < 1) return fail(invalid_argument("--targeted needs --spines S (stop once a pair has ports on each)"));
    if (a.cfg.ports_per_spine < 0) return fail(invalid_argument("--ports-per-spine must be >= 0 (0 = auto)"));
    auto pairs = schedule_pairs(a.targeted, static_cast<int>(hosts->size()));
    if (!pairs) return fail(pairs.status());
    a.cfg.pairs = *pairs;
    a.cfg.stop_at_spines = a.spines;
    // Targeted, --ports is a cap: a pair stops as soon as its spines have
    // their ports, so the default leaves room for K ports on many spines.
    if (!a.ports_given) a.cfg.sport_count = kDbPortsPerPair;
  }
  a.cfg.progress = !a.quiet;
  auto db = db::Database::open(a.db);
  if (!db) return fail(db.status());
  auto sum = agent::run_probe(*db, *hosts, *secret, a.cfg);
  if (!sum) return fail(sum.status());
  fmt::print("{}", agent::format_summary(*sum));
  return 0;
}

}  // namespace

void register_probe(CLI::App& app, Registry& reg) {
  static ProbeArgs a;
  auto* cmd = app.add_subcommand(
      "probe",
      "Map which spine every flow takes: every host's agent sweeps source ports\n"
      "towards every other host with DSCP-tagged probes (spine N rewrites DSCP X to\n"
      "X+N), and the results land in SQLite with the inferred fabric (leaves, spines,\n"
      "dead links). Start `weft agent` on every host first. A killed run resumes:\n"
      "rerun the same command.\n"
      "  weft probe --hosts hosts.txt --secret-file secret --db fabric.db\n"
      "  weft probe ... --backend tcp-syn --dport 5201   # the TCP transport's paths\n"
      "  weft probe ... --method ttl                     # switches that cannot rewrite DSCP\n"
      "  weft probe ... --targeted allreduce-hd --spines 8   # job launch: only HD pairs, each until\n"
      "        every spine has as many answered ports as its host has pairs (what weft route needs)\n"
      "Query the result: sqlite3 fabric.db 'SELECT * FROM paths LIMIT 5' (docs/database.md)");
  add_fleet_options(cmd, a.fleet);
  cmd->add_option("--db", a.db, "SQLite database to write")->capture_default_str();
  cmd->add_option("--method", a.cfg.method, "dscp|ttl")->capture_default_str();
  cmd->add_option("--backend", a.cfg.backend, "udp|tcp-syn|dpdk")->capture_default_str();
  cmd->add_option("--dport", a.dport, "Data port whose paths to learn (default 4791 udp, 5201 tcp-syn)");
  cmd->add_option("--sport-first", a.cfg.sport_first, "First source port")->capture_default_str();
  static CLI::Option* ports = cmd->add_option("--ports", a.cfg.sport_count,
                                              "Source ports per pair (targeted: at most; default 1024 there)")
                                  ->capture_default_str();
  cmd->add_option("--probes", a.cfg.probes_per_port, "Probes per 5-tuple (>1 finds unstable hashing)")
      ->capture_default_str();
  cmd->add_option("--rate", a.cfg.rate_pps, "Probes per second per sending host (0 = unlimited)")->capture_default_str();
  cmd->add_option("--timeout-ms", a.cfg.timeout_ms, "Wait for answers after a round")->capture_default_str();
  cmd->add_option("--retries", a.cfg.retries, "Resends of an unanswered probe")->capture_default_str();
  cmd->add_option("--port-window", a.cfg.port_window, "Source ports probed (and reported) at a time")
      ->capture_default_str();
  cmd->add_option("--probe-dscp", a.probe_dscp, "X: the DSCP probes leave with")->capture_default_str();
  cmd->add_option("--targeted", a.targeted, "Only the pairs of a collective (allreduce-hd, allreduce-ring, nccl-ring)");
  cmd->add_option("--spines", a.spines, "Targeted: stop a pair once this many spines have enough ports");
  cmd->add_option("--ports-per-spine", a.cfg.ports_per_spine,
                  "Targeted: answered ports a pair needs on each spine (0 = as many as its host has pairs: "
                  "every flow of a host gets its own source port)")
      ->capture_default_str();
  cmd->add_option("--batch", a.cfg.batch_rows, "Observations per database transaction")->capture_default_str();
  cmd->add_flag("-q,--quiet", a.quiet, "No progress bar");
  cmd->callback([&reg] {
    a.ports_given = ports->count() > 0;
    reg.run = [] { return run_probe(a); };
  });
}

}  // namespace weft::cli
