// weft rank: an allocation -> a rank order -> a rank file for a launcher.
#include <fmt/format.h>

#include "cli_common.h"
#include "weft/ranking/rank_file.h"
#include "weft/topology/topology_file.h"

namespace weft::cli {
namespace {

struct RankArgs {
  std::string topology;
  std::string hosts;
  bool all = false;
  std::string algo = "auto";
  std::string format = "csv";
  std::string out;
};

int run_rank(const RankArgs& a) {
  auto algo = ranking::parse_rank_algo(a.algo);
  if (!algo) return fail(invalid_argument(fmt::format("unknown --algo '{}' (auto, clos, hdrm, ring, rail, naive)", a.algo)));
  auto format = ranking::parse_rank_format(a.format);
  if (!format) {
    return fail(invalid_argument(
        fmt::format("unknown --format '{}' (openmpi, mpich, slurm, hccl, torchrun, csv)", a.format)));
  }
  if (a.all == !a.hosts.empty()) return fail(invalid_argument("give exactly one of --hosts FILE or --all"));
  auto fabric = topo::load_topology(a.topology);
  if (!fabric) return fail(fabric.status());
  auto alloc = a.all ? Result<std::vector<int>>(ranking::allocation_all(*fabric))
                     : ranking::load_allocation(*fabric, a.hosts);
  if (!alloc) return fail(alloc.status());
  auto order = ranking::rank(*fabric, *alloc, *algo);
  if (!order) return fail(order.status());
  auto text = ranking::format_rank_file(*fabric, *order, *format);
  if (!text) return fail(text.status());
  auto st = emit(a.out, *text);
  if (!st) return fail(st);
  if (!a.out.empty() && a.out != "-") {
    fmt::print(stderr, "wrote {} ({} ranks, {} order, {} format)\n", a.out, order->size(),
               ranking::rank_algo_name(*algo), a.format);
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
      "  naive the input order (the baseline)   auto: hdrm on BiGraph, clos otherwise");
  cmd->add_option("--topology", a.topology, "Topology file (weft topo gen ...)")->required();
  cmd->add_option("--hosts", a.hosts, "Allocation: one 'host' or 'host:nic' per line, '#' comments");
  cmd->add_flag("--all", a.all, "Allocate every NIC of the fabric");
  cmd->add_option("--algo", a.algo, "auto|clos|hdrm|ring|rail|naive")->capture_default_str();
  cmd->add_option("--format", a.format, "openmpi|mpich|slurm|hccl|torchrun|csv")->capture_default_str();
  cmd->add_option("-o,--output", a.out, "Output file (default: stdout); never left half-written");
  cmd->callback([&reg] { reg.run = [] { return run_rank(a); }; });
}

}  // namespace weft::cli
