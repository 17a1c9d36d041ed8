// weft topo gen clos|clos3|bigraph|rail, weft topo infer, weft topo show.
#include <algorithm>

#include <fmt/format.h>

#include "cli_common.h"
#include "fabric_svg.h"
#include "weft/db/database.h"
#include "weft/probe/inferred_topology.h"
#include "weft/topology/builders.h"
#include "weft/topology/topology_file.h"

namespace weft::cli {
namespace {

int write_fabric(const Result<topo::Fabric>& f, const std::string& out) {
  if (!f) return fail(f.status());
  auto st = emit(out, topo::topology_to_json(*f));
  if (!st) return fail(st);
  if (!out.empty() && out != "-") {
    fmt::print(stderr, "wrote {} ({} hosts, {} NICs, {} switches, {} links)\n", out, f->hosts.size(),
               f->nics.size(), f->switches.size(), f->links.size());
  }
  return 0;
}

// Per plane: its switches, and per rail its leaves and NICs.
void print_rails_planes(const topo::Fabric& f) {
  if (f.num_planes() == 0 && f.num_rails() == 0) return;
  const int planes = std::max(1, f.num_planes()), rails = std::max(1, f.num_rails());
  std::vector<int> spines(static_cast<size_t>(planes)), leaves(static_cast<size_t>(planes * rails));
  std::vector<int> nics(leaves.size()), plane_links(static_cast<size_t>(planes));
  for (const auto& s : f.switches) {
    const int p = std::max(0, s.plane);
    if (s.tier == topo::kTierLeaf) ++leaves[static_cast<size_t>(p * rails + std::max(0, s.rail))];
    else ++spines[static_cast<size_t>(p)];
  }
  for (size_t n = 0; n < f.nics.size(); ++n) {
    const int v = static_cast<int>(n);
    ++nics[static_cast<size_t>(std::max(0, f.nic_plane(v)) * rails + std::max(0, f.nic_rail(v)))];
  }
  for (size_t l = 0; l < f.links.size(); ++l) ++plane_links[static_cast<size_t>(std::max(0, f.link_plane(static_cast<int>(l))))];
  fmt::print("planes   {}  rails {}\n", f.num_planes() == 0 ? 1 : f.num_planes(), f.num_rails());
  for (int p = 0; p < planes; ++p) {
    if (f.num_planes() > 0) fmt::print("  plane {}: {} upper switches, {} links\n", p, spines[static_cast<size_t>(p)], plane_links[static_cast<size_t>(p)]);
    for (int r = 0; r < f.num_rails(); ++r) {
      fmt::print("  {}rail {}: {} leaves, {} NICs\n", f.num_planes() > 0 ? "  " : "", r,
                 leaves[static_cast<size_t>(p * rails + r)], nics[static_cast<size_t>(p * rails + r)]);
    }
    if (f.num_rails() == 0) fmt::print("    {} leaves, {} NICs\n", leaves[static_cast<size_t>(p)], nics[static_cast<size_t>(p)]);
  }
}

void print_summary(const topo::Fabric& f) {
  fmt::print("fabric   {} ({})\n", f.name, topo::fabric_kind_name(f.kind));
  fmt::print("hosts    {}  NICs {}\n", f.hosts.size(), f.nics.size());
  int tiers[3] = {0, 0, 0};
  for (const auto& s : f.switches) ++tiers[s.tier];
  fmt::print("switches {} (tier 0: {}, tier 1: {}, tier 2: {})\n", f.switches.size(), tiers[0], tiers[1], tiers[2]);
  int down = 0;
  for (const auto& l : f.links) down += l.state == topo::LinkState::kDown;
  fmt::print("links    {} ({} down)\n", f.links.size(), down);
  for (const auto& l : f.links) {
    if (l.state == topo::LinkState::kDown) fmt::print("  down: {} - {}\n", f.vertex_name(l.a), f.vertex_name(l.b));
  }
  print_rails_planes(f);
}

}  // namespace

void register_topo(CLI::App& app, Registry& reg) {
  auto* topo_cmd = app.add_subcommand("topo", "Generate and inspect topology files");
  topo_cmd->require_subcommand(1);
  auto* gen = topo_cmd->add_subcommand("gen", "Write a topology file for a fabric of a known shape");
  gen->require_subcommand(1);

  static topo::Clos2Spec c2;
  static topo::Clos3Spec c3;
  static topo::BiGraphSpec bg;
  static topo::RailSpec rs;
  static std::string out;
  static std::string show_path;
  static bool show_json = false;
  static std::string show_svg;

  auto* clos = gen->add_subcommand("clos", "2-tier Clos (spine-leaf): every leaf linked to every spine");
  clos->add_option("--spines", c2.spines, "Spine switches (S)")->required();
  clos->add_option("--leaves", c2.leaves, "Leaf switches (L)")->required();
  clos->add_option("--hosts", c2.hosts_per_leaf, "Hosts per leaf (H)")->required();
  clos->add_option("--nics", c2.nics_per_host, "NICs (subnodes) per host (G), all on the host's leaf")->capture_default_str();
  clos->add_option("--planes", c2.planes, "Planes P: disjoint copies of spines and leaves, NIC port k on plane k")->capture_default_str();
  clos->add_option("--gbps", c2.fabric_gbps, "Spine-leaf link rate, Gbit/s")->capture_default_str();
  clos->add_option("--access-gbps", c2.access_gbps, "NIC-leaf link rate, Gbit/s")->capture_default_str();
  clos->add_option("-o,--output", out, "Output file (default: stdout)");
  clos->callback([&reg] { reg.run = [] { return write_fabric(topo::build_clos2(c2), out); }; });

  auto* clos3 = gen->add_subcommand("clos3", "3-tier Clos: pods of leaves and aggregation switches under a core");
  clos3->add_option("--pods", c3.pods, "Pods")->required();
  clos3->add_option("--leaves", c3.leaves_per_pod, "Leaves per pod")->required();
  clos3->add_option("--aggs", c3.aggs_per_pod, "Aggregation switches per pod")->required();
  clos3->add_option("--cores", c3.cores, "Core switches (a multiple of --aggs: one plane per aggregation index)")->required();
  clos3->add_option("--hosts", c3.hosts_per_leaf, "Hosts per leaf")->required();
  clos3->add_option("--nics", c3.nics_per_host, "NICs per host")->capture_default_str();
  clos3->add_option("--gbps", c3.fabric_gbps, "Switch-switch link rate, Gbit/s")->capture_default_str();
  clos3->add_option("--access-gbps", c3.access_gbps, "NIC-leaf link rate, Gbit/s")->capture_default_str();
  clos3->add_option("-o,--output", out, "Output file (default: stdout)");
  clos3->callback([&reg] { reg.run = [] { return write_fabric(topo::build_clos3(c3), out); }; });

  auto* bigraph = gen->add_subcommand("bigraph", "EFLOPS BiGraph M x N: two parts, every upper switch linked to every lower");
  bigraph->add_option("--switches", bg.switches, "Switches N (even; N/2 per part)")->required();
  bigraph->add_option("--subnodes", bg.subnodes, "Subnodes M per switch (HDRM needs M <= N/2)")->required();
  bigraph->add_option("--gbps", bg.fabric_gbps, "Upper-lower link rate, Gbit/s")->capture_default_str();
  bigraph->add_option("--access-gbps", bg.access_gbps, "Subnode link rate, Gbit/s")->capture_default_str();
  bigraph->add_option("-o,--output", out, "Output file (default: stdout)");
  bigraph->callback([&reg] { reg.run = [] { return write_fabric(topo::build_bigraph(bg), out); }; });

  auto* rail = gen->add_subcommand(
      "rail", "Rail-optimised 2-tier: NIC g of every host on a leaf of rail g, every leaf linked to every spine");
  rail->footer(
      "Hosts h1..hH split over a rail's leaves in contiguous blocks (the same on every rail);\n"
      "use --rail-leaves > 1 when a leaf has fewer ports than there are hosts. With --planes P\n"
      "every plane is a rail fabric of its own (switches pl<k>-...) and NIC g's port k is on plane k.\n"
      "  weft topo gen rail --hosts 16 --nics 8 --rail-leaves 2 --spines 8 --planes 2 -o rail.json");
  rail->add_option("--hosts", rs.hosts, "Hosts (H)")->required();
  rail->add_option("--nics", rs.nics_per_host, "NICs per host (G) = rails")->required();
  rail->add_option("--rail-leaves", rs.leaves_per_rail, "Leaves per rail")->capture_default_str();
  rail->add_option("--spines", rs.spines, "Spines per plane (join the rails)")->required();
  rail->add_option("--planes", rs.planes, "Planes P: NIC port k on plane k, planes share no switch")->capture_default_str();
  rail->add_option("--gbps", rs.fabric_gbps, "Spine-leaf link rate, Gbit/s")->capture_default_str();
  rail->add_option("--access-gbps", rs.access_gbps, "NIC-leaf link rate, Gbit/s")->capture_default_str();
  rail->add_option("-o,--output", out, "Output file (default: stdout)");
  rail->callback([&reg] { reg.run = [] { return write_fabric(topo::build_rail(rs), out); }; });

  static std::string infer_db = "fabric.db";
  static probe::InferredTopologyOptions inf;
  static int64_t infer_campaign = 0;
  auto* infer = topo_cmd->add_subcommand(
      "infer", "Write the fabric a probe campaign found (leaves, spines, dead links) as a topology file");
  infer->footer(
      "Hosts are named as in the probe's hosts file, leaves l<N> in the order of their first\n"
      "host, spines s<N> by the number their DSCP rewrite (or TTL answer) gave; a spine-leaf\n"
      "link no probe crossed is written 'down'. Probes cannot measure link speeds: give them.\n"
      "Name every NIC 'host:nic' in the hosts file (one line per NIC address) and a rail or\n"
      "multi-plane fabric is recognised: planes share no probed link, rail g's leaves hold NIC g.\n"
      "  weft probe --hosts hosts.txt --secret-file secret --db fabric.db\n"
      "  weft topo infer --db fabric.db --gbps 400 --access-gbps 400 -o fabric.json");
  infer->add_option("--db", infer_db, "Probe database (weft probe --db)")->capture_default_str();
  static CLI::Option* campaign_opt =
      infer->add_option("--campaign", infer_campaign, "Campaign id, >= 1 (default: the newest finished one)");
  infer->add_option("--gbps", inf.fabric_gbps, "Spine-leaf link rate, Gbit/s")->capture_default_str();
  infer->add_option("--access-gbps", inf.access_gbps, "Host-leaf link rate, Gbit/s")->capture_default_str();
  infer->add_option("--name", inf.name, "Fabric name (default: probed-<campaign>)");
  infer->add_option("-o,--output", out, "Output file (default: stdout)");
  infer->callback([&reg] {
    reg.run = [] {
      if (campaign_opt->count() > 0) {
        if (infer_campaign < 1) {
          return fail(invalid_argument(
              fmt::format("--campaign {}: a campaign id is >= 1 (weft probe prints it)", infer_campaign)));
        }
        inf.campaign = infer_campaign;
      }
      db::OpenOptions ro;
      ro.read_only = true;
      auto db = db::Database::open(infer_db, ro);
      if (!db) return fail(db.status());
      return write_fabric(probe::inferred_topology(*db, inf), out);
    };
  });

  auto* show = topo_cmd->add_subcommand("show", "Validate a topology file and print it (--json: the normalised form)");
  show->add_option("file", show_path, "Topology file")->required();
  show->add_flag("--json", show_json,
                 "Print the normalised fabric as JSON: hosts with NICs, switches with tier (and part for "
                 "BiGraph, rail and plane where the fabric has them), every link with endpoints, capacity and state");
  show->add_option("--svg", show_svg,
                   "Also draw the fabric as SVG to this file: switches by tier, NICs under their leaf, "
                   "rail and plane in each tooltip, filled by plane");
  show->callback([&reg] {
    reg.run = [] {
      auto f = topo::load_topology(show_path);
      if (!f) return fail(f.status());
      if (!show_svg.empty()) {
        if (auto st = emit(show_svg, fabric_svg(*f, {SvgPanel{f->name, {}, {}}})); !st) return fail(st);
      }
      if (show_json) {
        fmt::print("{}", topo::topology_to_json(*f));
      } else {
        print_summary(*f);
      }
      return 0;
    };
  });
}

}  // namespace weft::cli
