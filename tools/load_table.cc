#include "load_table.h"

#include <fmt/format.h>

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
  return out;
}

}  // namespace weft::cli
