#include "load_table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_common.h"

namespace weft::cli {

std::string format_load_table(const topo::Fabric& f, const routing::LoadReport& rep) {
  std::string out = fmt::format("{:>4}  {:<7} {:>5} {:>6} {:>7} {:>9}  {:>8} {:>6}  {}\n", "step", "phase", "dist",
                                "flows", "fabric", "bytes/lnk", "max load", "bound", "hottest link");
  for (const auto& s : rep.steps) {
    std::string phase = s.repeat > 1 ? fmt::format("{}x{}", s.phase, s.repeat) : s.phase;
    out += fmt::format("{:>4}  {:<7} {:>5} {:>6} {:>7} {:>9}  {:>8} {:>6}  {}{}{}\n", s.step, phase, s.distance,
                       s.flows, s.fabric_flows, format_bytes(static_cast<double>(s.max_bytes)), s.max_load,
                       s.lower_bound, s.hottest >= 0 ? f.directed_name(s.hottest) : "-",
                       s.max_load > s.lower_bound ? "   <- congested" : "",
                       s.rounds > 1 ? fmt::format("   ({} rounds; one round: bound {})", s.rounds, s.single_round_bound)
                                    : "");
  }
  out += fmt::format("max load {} (lower bound {}) over {} steps{}\n", rep.max_load, rep.max_lower_bound,
                     rep.steps.size(),
                     rep.max_rounds > 1 ? fmt::format(", load per round (up to {} rounds)", rep.max_rounds) : "");
  if (f.num_rails() == 0 && f.num_planes() == 0) return out;
  // Rail and plane fabrics: which flows leave their rail or plane, and the
  // max load over each rail's and each plane's links (link_load.h).
  out += fmt::format("{:>4}  {:>6} {:>7}  {:<24} {}\n", "step", "x-rail", "x-plane", "max load per rail", "per plane");
  for (const auto& s : rep.steps) {
    out += fmt::format("{:>4}  {:>6} {:>7}  {:<24} {}\n", s.step, s.cross_rail_flows, s.cross_plane_flows,
                       s.rail_max_load.empty() ? "-" : fmt::format("{}", fmt::join(s.rail_max_load, " ")),
                       s.plane_max_load.empty() ? "-" : fmt::format("{}", fmt::join(s.plane_max_load, " ")));
  }
  return out;
}

}  // namespace weft::cli
