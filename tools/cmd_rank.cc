// weft rank: an allocation -> a rank order -> a rank file for a launcher.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_common.h"
#include "weft/ranking/rank_file.h"
#include "weft/routing/auto_order.h"
#include "weft/routing/hybrid_schedule.h"
#include "weft/routing/planner.h"
#include "weft/topology/topology_file.h"

namespace weft::cli {
namespace {

struct RankArgs {
  std::string topology;
  std::string hosts;
  bool all = false;
  std::string algo = "auto";
  std::string format = "csv";
  std::string collective = "allreduce-hd";  // what auto ranks for
  std::string out;
};

// The first four names, then "..." if there are more.
std::string first_few(const std::vector<std::string>& names) {
  const size_t shown = std::min<size_t>(names.size(), 4);
  return fmt::format("{}{}", fmt::join(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                     names.size() > shown ? ", ..." : "");
}

// A NIC whose access link is down has no route (routing/paths.h
// check_access_link), so `weft route` and `weft check` refuse an order with
// it. The rank file is still written, as asked: the allocation is the
// scheduler's; one line says which NICs and what to do.
void warn_down_access_links(const topo::Fabric& f, const std::vector<int>& alloc, ranking::RankFormat format) {
  const std::vector<int> down = access_down_nics(f, alloc);
  if (down.empty()) return;
  // A host-only format gives a host's k-th rank its k-th NIC: leaving one
  // NIC out of a host makes the others unexpressible there.
  const std::string leave = ranking::format_carries_nics(format)
                                ? "leave them out (--hosts)"
                                : fmt::format("leave their hosts out (--hosts; {} names hosts only, so a host goes "
                                              "whole)",
                                              ranking::rank_format_name(format));
  fmt::print(stderr,
             "weft rank: warning: {} allocated NIC(s) have their access link down: {}; no route reaches them, so "
             "weft route refuses this order: {} or bring the links up\n",
             down.size(), describe_access(f, down), leave);
}

// HCCL connects devices by device_ip: a NIC the topology gives no address
// is written as 0.0.0.0, which the user must fill in.
void warn_missing_addresses(const topo::Fabric& f, const ranking::RankOrder& order) {
  std::vector<std::string> missing;
  for (int n : order.nics) {
    if (f.nics[static_cast<size_t>(n)].address.empty()) missing.push_back(f.nic_qualified_name(n));
  }
  if (missing.empty()) return;
  fmt::print(stderr,
             "weft rank: warning: {} NIC(s) have no address in the topology ({}): their device_ip is 0.0.0.0; give "
             "them \"address\" (docs/topology-format.md) or fill the table in before HCCL reads it\n",
             missing.size(), first_few(missing));
}

// auto is resolved for the collective the job runs (routing/auto_order.h).
// `algo` becomes the algorithm used; `why` says why auto took it, where it
// weighed orders or fell back from the fabric's own ("" elsewhere).
Result<ranking::RankOrder> rank_as_asked(const topo::Fabric& f, const std::vector<int>& alloc, routing::Collective c,
                                         ranking::RankAlgo& algo, std::string& why) {
  if (algo != ranking::RankAlgo::kAuto) return ranking::rank(f, alloc, algo);
  WEFT_ASSIGN_OR_RETURN(auto chosen, routing::auto_order(f, alloc, c));
  algo = chosen.algo;
  why = std::move(chosen.why);
  return std::move(chosen.order);
}

// The order is for `weft route --collective` of the same job: an order that
// command would refuse (nccl-ring: one rank per host; hybrid: as many ranks
// on every host) is refused here, with its words, before a launcher uses it.
Status routable(const topo::Fabric& f, const ranking::RankOrder& order, routing::Collective c) {
  if (c == routing::Collective::kNcclRing) return routing::validate_nccl_ring(f, order, routing::PlannerOptions{});
  if (c != routing::Collective::kAllreduceHybrid) return ok_status();
  return routing::build_fabric_schedule(f, order, c, static_cast<uint64_t>(order.size()) * 1024).status();
}

int run_rank(const RankArgs& a) {
  auto algo = ranking::parse_rank_algo(a.algo);
  if (!algo) return fail(invalid_argument(fmt::format("unknown --algo '{}' (auto, clos, hdrm, ring, rail, naive)", a.algo)));
  auto format = ranking::parse_rank_format(a.format);
  if (!format) {
    return fail(invalid_argument(
        fmt::format("unknown --format '{}' (openmpi, mpich, slurm, hccl, torchrun, csv)", a.format)));
  }
  auto coll = collective_option(a.collective);
  if (!coll) return fail(coll.status());
  if (a.all == !a.hosts.empty()) return fail(invalid_argument("give exactly one of --hosts FILE or --all"));
  auto fabric = topo::load_topology(a.topology);
  if (!fabric) return fail(fabric.status());
  auto alloc = a.all ? Result<std::vector<int>>(ranking::allocation_all(*fabric))
                     : ranking::load_allocation(*fabric, a.hosts);
  if (!alloc) return fail(alloc.status());
  warn_down_access_links(*fabric, *alloc, *format);
  ranking::RankAlgo used = *algo;
  std::string why;
  auto order = rank_as_asked(*fabric, *alloc, *coll, used, why);
  if (!order) return fail(order.status());
  auto text = ranking::format_rank_file(*fabric, *order, *format);
  if (!text && *algo == ranking::RankAlgo::kAuto && used != ranking::resolve_auto(*fabric, *alloc)) {
    // The format cannot carry the order auto weighed best (torchrun, MPICH
    // and Slurm need a host's ranks contiguous, which leaf sets split on a
    // rail fabric): the fabric's own order, which keeps hosts whole, rather
    // than no file.
    const ranking::RankAlgo own = ranking::resolve_auto(*fabric, *alloc);
    auto fallback = ranking::rank(*fabric, *alloc, own);
    auto fallback_text =
        fallback ? ranking::format_rank_file(*fabric, *fallback, *format) : Result<std::string>(fallback.status());
    if (fallback_text) {
      why = fmt::format("{} cannot carry the {} order ({})", a.format, ranking::rank_algo_name(used),
                        text.status().message());
      used = own;
      order = std::move(fallback);
      text = std::move(fallback_text);
    }
  }
  // One line, for the order written (or refused).
  if (!why.empty()) {
    fmt::print(stderr, "weft rank: auto ranks this allocation with {}: {}\n", ranking::rank_algo_name(used), why);
  }
  if (!text) return fail(text.status());
  if (auto st = routable(*fabric, *order, *coll); !st) {
    return fail(st.with_context(fmt::format("--collective {}: weft route would refuse this order", a.collective)));
  }
  auto st = emit(a.out, *text);
  if (!st) return fail(st);
  if (*format == ranking::RankFormat::kHccl) warn_missing_addresses(*fabric, *order);
  if (!a.out.empty() && a.out != "-") {
    const std::string how = *algo == used ? std::string(ranking::rank_algo_name(used))
                                          : fmt::format("auto ({})", ranking::rank_algo_name(used));
    fmt::print(stderr, "wrote {} ({} ranks, {} order, {} format)\n", a.out, order->size(), how, a.format);
  }
  return 0;
}

}  // namespace

void register_rank(CLI::App& app, Registry& reg) {
  static RankArgs a;
  auto* cmd = app.add_subcommand(
      "rank",
      "Rank a job's subnodes for congestion-free collectives and write a rank file.\n"
      "  clos  contiguous leaf sets (ACCL): HD steps stay in a leaf as long as possible\n"
      "  hdrm  EFLOPS rank mapping on a BiGraph: every HD partner one direct link away\n"
      "  ring  leaf by leaf: a ring crosses each leaf boundary once\n"
      "  rail  rail-optimised and multi-plane fabrics: a host's NICs are consecutive ranks,\n"
      "        hosts in leaf-set order, so each inter-host step stays on one rail\n"
      "  naive the input order (the baseline)\n"
      "  auto  for --collective: ring for the rings; else hdrm on a BiGraph where the\n"
      "        allocation fits it (docs/ranking.md), else clos; on a rail or\n"
      "        multi-plane fabric rail or clos, whichever the link-load checker bounds lower\n"
      "        (ties: rail); clos otherwise\n"
      "One rank per NIC (subnode). A NIC whose access link is down is named on stderr:\n"
      "no route reaches it, so weft route refuses the order.");
  cmd->add_option("--topology", a.topology, "Topology file (weft topo gen ...)")->required();
  cmd->add_option("--hosts", a.hosts,
                  "Allocation: one 'host' (every NIC of it) or 'host:nic' per line, '#' comments; words after the "
                  "name (an MPI hostfile's 'slots=N') are ignored: ranks are NICs");
  cmd->add_flag("--all", a.all, "Allocate every NIC of the fabric");
  cmd->add_option("--algo", a.algo, "auto|clos|hdrm|ring|rail|naive")->capture_default_str();
  cmd->add_option("--collective", a.collective,
                  "auto: the collective to rank for, allreduce-hd|allreduce-ring|allreduce-hybrid|nccl-ring")
      ->capture_default_str();
  cmd->add_option("--format", a.format, "openmpi|mpich|slurm|hccl|torchrun|csv")->capture_default_str();
  cmd->add_option("-o,--output", a.out, "Output file (default: stdout); never left half-written");
  cmd->callback([&reg] { reg.run = [] { return run_rank(a); }; });
}

}  // namespace weft::cli
