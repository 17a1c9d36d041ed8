// weft demo: the main job on an embedded default fabric.
//
// For now: a 4 spine x 4 leaf x 4 host Clos is ranked (input order vs weft's
// leaf sets), routed (ECMP vs ideal spines) and checked step by step, and the
// two are printed side by side.
#include <fmt/format.h>

#include "cli_common.h"
#include "fabric_svg.h"
#include "load_table.h"
#include "weft/ranking/rank_order.h"
#include "weft/routing/link_load.h"
#include "weft/topology/builders.h"

namespace weft::cli {
namespace {

struct DemoArgs {
  int spines = 4, leaves = 4, hosts = 4;
  uint32_t seed = 1;
  std::string svg = "weft-demo.svg";
};

// Predicted utilisation of every directed link over the whole collective:
// a step lasts as long as its busiest link needs (bytes / rate), and a link
// is busy for its own bytes / rate of that time.
std::vector<double> predicted_utilisation(const topo::Fabric& f, const routing::LoadReport& rep) {
  std::vector<double> busy(2 * f.links.size(), 0);
  double total = 0;
  for (const auto& s : rep.steps) {
    double longest = 0;
    for (size_t dl = 0; dl < s.bytes.size(); ++dl) {
      const double t = static_cast<double>(s.bytes[dl]) * 8 / (f.links[dl / 2].gbps * 1e9);
      busy[dl] += t;
      longest = std::max(longest, t);
    }
    total += longest;
  }
  for (double& b : busy) b = total > 0 ? b / total : 0;
  return busy;
}

// The input order a launcher typically produces: hosts interleaved across
// leaves (round-robin by leaf), which is what scheduler node lists look like
// after sorting by name on many sites.
std::vector<int> interleaved(const topo::Fabric& f) {
  std::vector<int> out;
  std::vector<std::vector<int>> by_leaf(f.switches.size());
  for (size_t n = 0; n < f.nics.size(); ++n) by_leaf[f.nic_switch(static_cast<int>(n))].push_back(static_cast<int>(n));
  for (size_t k = 0;; ++k) {
    bool any = false;
    for (auto& v : by_leaf) {
      if (k < v.size()) out.push_back(v[k]), any = true;
    }
    if (!any) break;
  }
  return out;
}

int run_demo(const DemoArgs& a) {
  auto fabric = topo::build_clos2({.spines = a.spines, .leaves = a.leaves, .hosts_per_leaf = a.hosts});
  if (!fabric) return fail(fabric.status());
  const auto& f = *fabric;
  auto input = interleaved(f);
  auto naive = ranking::rank(f, input, ranking::RankAlgo::kNaive);
  auto weft_order = ranking::rank(f, input, ranking::RankAlgo::kAuto);
  if (!naive || !weft_order) return fail(!naive ? naive.status() : weft_order.status());
  auto sched = routing::build_schedule(routing::Collective::kAllreduceHd, naive->size(), (64u << 20) / 4, 4);
  if (!sched) return fail(sched.status());
  auto ecmp = routing::make_ecmp_router(f, *naive, {.seed = a.seed});
  auto ideal = routing::make_ideal_router(f, *weft_order);
  auto before = routing::check_link_load(f, *naive, *sched, *ecmp, {.keep_per_link = true});
  auto after = routing::check_link_load(f, *weft_order, *sched, *ideal, {.keep_per_link = true});
  if (!before || !after) return fail(!before ? before.status() : after.status());

  fmt::print("weft demo: HD AllReduce of 64 MiB on {} ({} hosts)\n\n", f.name, f.hosts.size());
  fmt::print("(a) input order (hosts interleaved across leaves), ECMP with random ports:\n{}\n",
             format_load_table(f, *before));
  fmt::print("(b) weft: contiguous leaf sets + ideal spine per flow:\n{}\n", format_load_table(f, *after));
  // A step's time is set by its most loaded link: load L shares the link L ways.
  double t_before = 0, t_after = 0;
  for (const auto& s : before->steps) t_before += static_cast<double>(s.max_bytes);
  for (const auto& s : after->steps) t_after += static_cast<double>(s.max_bytes);
  fmt::print("bytes on the busiest link per step, summed: (a) {}  (b) {}  -> (b) is {:.2f}x faster on a\n"
             "fabric whose links are the bottleneck (the simulator and the emulated fabric measure it).\n",
             format_bytes(t_before), format_bytes(t_after), t_before / t_after);
  if (!a.svg.empty()) {
    auto st = emit(a.svg, fabric_svg(f, {{"(a) input order, ECMP", predicted_utilisation(f, *before)},
                                         {"(b) weft order, planned spines", predicted_utilisation(f, *after)}}));
    if (!st) return fail(st);
    fmt::print("wrote {} (link utilisation of (a) and (b))\n", a.svg);
  }
  return after->max_load == after->max_lower_bound ? 0 : 1;
}

}  // namespace

void register_demo(CLI::App& app, Registry& reg) {
  static DemoArgs a;
  auto* cmd = app.add_subcommand("demo", "Rank, route and check a bundled example fabric (weft's main job)");
  cmd->add_option("--spines", a.spines, "Spines of the example Clos")->capture_default_str();
  cmd->add_option("--leaves", a.leaves, "Leaves")->capture_default_str();
  cmd->add_option("--hosts", a.hosts, "Hosts per leaf")->capture_default_str();
  cmd->add_option("--seed", a.seed, "ECMP seed for the unplanned run")->capture_default_str();
  cmd->add_option("--svg", a.svg, "Write the fabric with link utilisation of (a) and (b) here ('' = none)")
      ->capture_default_str();
  cmd->callback([&reg] { reg.run = [] { return run_demo(a); }; });
}

}  // namespace weft::cli
