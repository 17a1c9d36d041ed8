// weft sim: what congestion-free routing is worth, by flow-level simulation.
// (a) the allocation's order + default ECMP, (b) leaf sets + ECMP, (c) weft's
// ranking + planned ports, (d) an ideal non-blocking switch — on one fabric,
// or on a sweep of generated 2-tier Clos fabrics; a table and an SVG plot of
// busbw against endpoints.
#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "plot_svg.h"
#include "weft/ranking/rank_order.h"
#include "weft/routing/compare.h"
#include "weft/topology/builders.h"
#include "weft/topology/topology_file.h"

namespace weft::cli {
namespace {

struct SimArgs {
  std::string topology;
  std::string hosts;
  std::string fabric = "clos";  // the sweep's fabric kind: clos | rail
  int spines = 8;
  int hosts_per_leaf = 8;
  int nics = 1;    // sweep: NICs per host (rail: rails)
  int planes = 1;  // sweep: planes
  std::string leaves = "2,4,8,16,32";
  double gbps = 100;
  std::string collective = "allreduce-hd";
  std::string size = "64MiB";
  double latency_us = 1.0;
  double shm_gbps = 1600;
  std::string hash = "crc32";
  uint32_t seed = 1;
  int trials = 3;
  int ports_per_pair = 64;
  std::string svg = "weft-sim.svg";
  bool json = false;
  std::optional<int> channels;  // nccl-ring (cli_common.h)
  std::optional<int> qps;
};

Result<std::vector<int>> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const int v = std::stoi(item, &used);
      if (used != item.size() || v < 1) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      return invalid_argument(fmt::format("bad --leaves '{}' (a comma-separated list of counts >= 1, e.g. 2,4,8)", s));
    }
  }
  if (out.empty()) return invalid_argument("--leaves is empty");
  return out;
}

// Rows of the table, one per case.
std::string table_rows(const routing::Comparison& c) {
  std::string out;
  const double ideal = c.cases.back().busbw;
  for (const auto& k : c.cases) {
    double worst = 0, mean = 0;
    for (double u : k.utilisation) worst = std::max(worst, u), mean += u;
    out += fmt::format("{:>9}  {:<22} {:>10.3f} {:>9.2f} {:>9.2f} {:>8.1f}% {:>8} {:>8.0f}%\n", c.endpoints, k.name,
                       k.seconds * 1e3, k.algbw / 1e9, k.busbw / 1e9, 100 * k.busbw / ideal, k.max_load, 100 * worst);
  }
  return out;
}

nlohmann::json to_json(const topo::Fabric& f, const routing::Comparison& c, bool per_link) {
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& k : c.cases) {
    nlohmann::json jc = {{"case", k.name}, {"seconds", k.seconds}, {"algbw_GBps", k.algbw / 1e9},
                         {"busbw_GBps", k.busbw / 1e9}, {"max_load", k.max_load}};
    if (per_link) {
      nlohmann::json links = nlohmann::json::object();
      for (size_t l = 0; l < k.utilisation.size(); ++l) {
        if (k.utilisation[l] > 0) links[f.directed_name(static_cast<int>(l))] = k.utilisation[l];
      }
      jc["utilisation"] = std::move(links);
    }
    cases.push_back(std::move(jc));
  }
  return {{"fabric", f.name}, {"endpoints", c.endpoints}, {"cases", std::move(cases)}};
}

int run_sim(const SimArgs& a) {
  if (auto c = collective_option(a.collective); !c) return fail(c.status());
  auto coll = routing::parse_sim_collective(a.collective);  // the same names
  if (!coll) return fail(internal_error(fmt::format("weft sim does not run --collective {}", a.collective)));
  auto shape = nccl_ring_shape(a.collective, a.channels, a.qps);
  if (!shape) return fail(shape.status());
  auto bytes = parse_size(a.size);
  if (!bytes || *bytes < 4 || *bytes % 4 != 0) {
    return fail(invalid_argument(fmt::format("bad --size '{}' (a multiple of 4 bytes, e.g. 64MiB)", a.size)));
  }
  if (!(a.latency_us >= 0) || !std::isfinite(a.latency_us)) {
    return fail(invalid_argument(fmt::format("--latency-us must be a finite number >= 0 (got {})", a.latency_us)));
  }
  if (!(a.shm_gbps > 0) || !std::isfinite(a.shm_gbps)) {
    return fail(invalid_argument(fmt::format("--shm-gbps must be a finite number > 0 (got {})", a.shm_gbps)));
  }
  // The plot is written after minutes of simulation: a bad path fails now.
  if (auto st = check_output_path("--svg", a.svg); !st) return fail(st);
  routing::CompareOptions opt;
  opt.collective = *coll;
  opt.bytes = *bytes;
  opt.sim.hop_latency_s = a.latency_us * 1e-6;
  opt.shm_gbps = a.shm_gbps;
  opt.hash = a.hash;
  opt.seed = a.seed;
  opt.trials = a.trials;
  opt.ports_per_pair = a.ports_per_pair;
  opt.nccl = *shape;
  if (auto h = routing::make_hash(a.hash, a.seed); !h) return fail(h.status());

  // The fabrics: one file, or a sweep of generated Clos fabrics.
  std::vector<topo::Fabric> fabrics;
  if (!a.topology.empty()) {
    auto f = topo::load_topology(a.topology);
    if (!f) return fail(f.status());
    fabrics.push_back(std::move(*f));
  } else {
    if (a.fabric != "clos" && a.fabric != "rail") {
      return fail(invalid_argument(fmt::format("unknown --fabric '{}' (clos, rail)", a.fabric)));
    }
    auto leaves = parse_list(a.leaves);
    if (!leaves) return fail(leaves.status());
    for (int l : *leaves) {
      // rail: --leaves counts each rail's leaves, --hosts-per-leaf the hosts under each.
      auto f = a.fabric == "rail"
                   ? topo::build_rail({.hosts = l * a.hosts_per_leaf, .nics_per_host = a.nics, .leaves_per_rail = l,
                                       .spines = a.spines, .planes = a.planes, .fabric_gbps = a.gbps,
                                       .access_gbps = a.gbps})
                   : topo::build_clos2({.spines = a.spines, .leaves = l, .hosts_per_leaf = a.hosts_per_leaf,
                                        .nics_per_host = a.nics, .planes = a.planes, .fabric_gbps = a.gbps,
                                        .access_gbps = a.gbps});
      if (!f) return fail(f.status());
      fabrics.push_back(std::move(*f));
    }
  }
  std::vector<routing::Comparison> results;
  for (const auto& f : fabrics) {
    std::vector<int> alloc;
    if (!a.hosts.empty()) {
      auto al = ranking::load_allocation(f, a.hosts);
      if (!al) return fail(al.status());
      alloc = std::move(*al);
    } else {
      // Every NIC a scheduler could hand out: one whose access link is down
      // has no route, so it is left out (and named). A scheduler's node list
      // has no regard for leaves: shuffled (seeded).
      alloc = ranking::allocation_all(f);
      if (const std::vector<int> down = access_down_nics(f, alloc); !down.empty()) {
        fmt::print(stderr, "weft sim: {}: leaving out {} NIC(s) whose access link is down: {} (--hosts to choose)\n",
                   f.name, down.size(), describe_access(f, down));
        std::erase_if(alloc, [&](int nic) { return std::find(down.begin(), down.end(), nic) != down.end(); });
      }
      std::shuffle(alloc.begin(), alloc.end(), std::mt19937(a.seed));
    }
    if (alloc.size() < 2) {
      return fail(invalid_argument(fmt::format("{}: a collective needs at least 2 endpoints, the allocation has {}",
                                               f.name, alloc.size())));
    }
    if (fabrics.size() > 1 || alloc.size() >= 4096) {
      fmt::print(stderr, "simulating {} on {} ({} endpoints)...\n", a.collective, f.name, alloc.size());
    }
    auto c = routing::compare_routings(f, alloc, opt);
    if (!c) return fail(c.status().with_context(f.name));
    results.push_back(std::move(*c));
  }

  if (!a.svg.empty()) {
    std::vector<PlotSeries> series(results.front().cases.size());
    for (size_t k = 0; k < series.size(); ++k) {
      series[k].name = results.front().cases[k].name;
      for (const auto& r : results) {
        series[k].x.push_back(r.endpoints);
        series[k].y.push_back(r.cases[k].busbw / 1e9);
      }
    }
    // The fabric kind in the title: one plot per kind (docs/simulator.md).
    const auto& f0 = fabrics.front();
    std::string kind(topo::fabric_kind_name(f0.kind));
    if (f0.num_planes() > 1) kind += fmt::format(", {} planes", f0.num_planes());
    auto st = emit(a.svg, line_plot_svg(fmt::format("{} of {} on {}, busbw", a.collective,
                                                    format_bytes(static_cast<double>(*bytes)), kind),
                                        "endpoints", "busbw (GB/s)", series));
    if (!st) return fail(st);
  }
  if (a.json) {
    nlohmann::json all = nlohmann::json::array();
    for (size_t i = 0; i < results.size(); ++i) all.push_back(to_json(fabrics[i], results[i], fabrics.size() == 1));
    fmt::print("{}\n", all.dump(2));
    return 0;
  }
  fmt::print("{} of {} per rank, max-min fair flows, {} ECMP (mean of {} seeds for a, b)\n", a.collective,
             format_bytes(static_cast<double>(*bytes)), a.hash, a.trials);
  fmt::print("{:>9}  {:<22} {:>10} {:>9} {:>9} {:>9} {:>8} {:>9}\n", "endpoints", "case", "time ms", "algbw", "busbw",
             "vs ideal", "max load", "max util");
  for (const auto& r : results) fmt::print("{}", table_rows(r));
  fmt::print("algbw, busbw in GB/s (nccl-tests: busbw = algbw x 2(n-1)/n); max util = busiest directed link's "
             "bytes / (rate x time){}\n", a.svg.empty() ? "" : fmt::format("; plot: {}", a.svg));
  return 0;
}

}  // namespace

void register_sim(CLI::App& app, Registry& reg) {
  static SimArgs a;
  auto* cmd = app.add_subcommand(
      "sim",
      "Simulate a collective flow by flow (max-min fair sharing of every directed link,\n"
      "per-hop latency) and compare four ways of running it:\n"
      "  (a) the allocation's order, ECMP with random ephemeral ports (what you get today)\n"
      "  (b) leaf-set ranking, still ECMP     (c) weft: ranking + planned source ports\n"
      "  (d) an ideal non-blocking switch (the bound)\n"
      "On --topology (with --hosts, or every NIC whose link is up), or on generated\n"
      "fabrics (--fabric clos: 2-tier Clos of --spines x L x --hosts-per-leaf; rail: --nics\n"
      "rails of L leaves each) for each L in --leaves, with --nics NICs per host and --planes\n"
      "planes. Prints a table and writes an SVG plot of busbw against endpoints, titled with\n"
      "the fabric kind.");
  cmd->add_option("--topology", a.topology, "Topology file (default: a sweep of generated Clos fabrics)");
  cmd->add_option("--hosts", a.hosts, "Allocation for --topology (default: every NIC whose access link is up, shuffled by --seed)");
  cmd->add_option("--fabric", a.fabric, "Sweep: clos (2-tier) or rail (rail-optimised: --leaves per rail)")
      ->capture_default_str();
  cmd->add_option("--spines", a.spines, "Sweep: spines (per plane)")->capture_default_str();
  cmd->add_option("--nics", a.nics, "Sweep: NICs per host (rail: rails)")->capture_default_str();
  cmd->add_option("--planes", a.planes, "Sweep: planes (NIC port k on plane k)")->capture_default_str();
  cmd->add_option("--hosts-per-leaf", a.hosts_per_leaf, "Sweep: hosts per leaf")->capture_default_str();
  cmd->add_option("--leaves", a.leaves, "Sweep: leaf counts, comma-separated")->capture_default_str();
  cmd->add_option("--gbps", a.gbps, "Sweep: link rate, Gbit/s")->capture_default_str();
  cmd->add_option("--collective", a.collective, "allreduce-hd|allreduce-ring|allreduce-hybrid|nccl-ring")
      ->capture_default_str();
  add_nccl_ring_options(*cmd, a.channels, a.qps);
  cmd->add_option("--size", a.size, "Bytes per rank (K, M, G suffixes)")->capture_default_str();
  cmd->add_option("--latency-us", a.latency_us, "Latency per link crossed, microseconds")->capture_default_str();
  cmd->add_option("--shm-gbps", a.shm_gbps, "Hybrid: intra-host bandwidth per rank, Gbit/s")->capture_default_str();
  cmd->add_option("--hash", a.hash, "The fabric's ECMP model: crc32|crc32-qp|linux-l4|linux-l3 (crc32-qp: E-ECMP, the RoCE destination QP "
                  "hashed too; ECMP draws a random QPN, weft plans one of a default pool)")->capture_default_str();
  cmd->add_option("--seed", a.seed, "Hash, port and shuffle seed")->capture_default_str();
  cmd->add_option("--trials", a.trials, "ECMP seeds averaged for (a) and (b)")->capture_default_str();
  cmd->add_option("--ports-per-pair", a.ports_per_pair,
                  "(c): candidate source ports per pair (nccl-ring: at least 16 per QP of the pair)")->capture_default_str();
  cmd->add_option("--svg", a.svg, "Plot file ('' = none)")->capture_default_str();
  cmd->add_flag("--json", a.json, "Print JSON (with per-link utilisation for a single fabric)");
  cmd->callback([&reg] { reg.run = [] { return run_sim(a); }; });
}

}  // namespace weft::cli
