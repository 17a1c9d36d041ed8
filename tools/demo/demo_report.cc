// demo_report.h: measured utilisation, tables, JSON.
#include "demo_report.h"

#include <algorithm>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "demo_text.h"

namespace weft::cli::demo {
namespace {

// "h3-2" -> 3: the emulated leaf a host hangs off (netns-fabric.sh naming).
int leaf_of_host(const std::string& name) {
  if (name.size() < 4 || name[0] != 'h') return -1;
  try {
    return std::stoi(name.substr(1, name.find('-') - 1));
  } catch (const std::exception&) {
    return -1;
  }
}

struct Stats {
  double mean = 0, lo = 0, hi = 0;
  int n = 0;
};
Stats stats(const std::vector<double>& v) {
  Stats s;
  if (v.empty()) return s;
  s.n = static_cast<int>(v.size());
  s.lo = *std::min_element(v.begin(), v.end());
  s.hi = *std::max_element(v.begin(), v.end());
  for (double x : v) s.mean += x / s.n;
  return s;
}

std::vector<const TrialResult*> intact(const std::vector<TrialResult>& trials) {
  std::vector<const TrialResult*> out;
  for (const auto& t : trials) {
    if (!t.failed_link) out.push_back(&t);
  }
  return out;
}

std::string pct(const std::vector<double>& u, int dlink) {
  if (u.empty()) return "   -";
  return fmt::format("{:>3.0f}%", 100 * u[static_cast<size_t>(dlink)]);
}

}  // namespace

Result<std::vector<double>> measured_utilisation(const topo::Fabric& f, const FabricCounters& bytes, double seconds,
                                                 int rate_mbit) {
  if (!(seconds > 0) || rate_mbit <= 0) return invalid_argument("utilisation needs a duration and a link rate");
  const double capacity = rate_mbit * 1e6 / 8 * seconds;  // bytes one direction can carry
  std::vector<double> u(2 * f.links.size(), 0);
  for (size_t l = 0; l < f.links.size(); ++l) {
    const auto& link = f.links[l];
    const bool a_sw = f.is_switch_vertex(link.a), b_sw = f.is_switch_vertex(link.b);
    uint64_t forward = 0, backward = 0;  // a -> b, b -> a
    if (!a_sw || !b_sw) {
      // Host link: "up" is host -> leaf.
      const int nic = a_sw ? link.b : link.a;
      const std::string& host = f.hosts[static_cast<size_t>(f.nics[static_cast<size_t>(nic)].host)].name;
      auto up = bytes.host.find({host, true}), down = bytes.host.find({host, false});
      if (up == bytes.host.end() || down == bytes.host.end()) {
        return not_found(fmt::format("no counters for the link of host {}", host));
      }
      forward = a_sw ? down->second : up->second;
      backward = a_sw ? up->second : down->second;
    } else {
      // Spine-leaf link: "up" is leaf -> spine; the leaf is named by its hosts.
      const int sa = f.vertex_switch(link.a), sb = f.vertex_switch(link.b);
      const bool a_spine = f.switches[static_cast<size_t>(sa)].tier == topo::kTierSpine;
      const int spine = a_spine ? sa : sb, leaf = a_spine ? sb : sa;
      const auto& nics = f.switch_nics(leaf);
      if (nics.empty()) continue;  // a leaf without hosts carries no measured traffic
      const int emu_leaf = leaf_of_host(f.hosts[static_cast<size_t>(f.nics[static_cast<size_t>(nics.front())].host)].name);
      const int number = f.switches[static_cast<size_t>(spine)].id;
      auto up = bytes.spine_leaf.find({number, emu_leaf, true}), down = bytes.spine_leaf.find({number, emu_leaf, false});
      if (up == bytes.spine_leaf.end() || down == bytes.spine_leaf.end()) {
        return not_found(fmt::format("no counters for spine {} - leaf {}", number, emu_leaf));
      }
      forward = a_spine ? down->second : up->second;
      backward = a_spine ? up->second : down->second;
    }
    u[2 * l] = static_cast<double>(forward) / capacity;
    u[2 * l + 1] = static_cast<double>(backward) / capacity;
  }
  return u;
}

std::string trial_header() {
  return fmt::format("{:>5} {:>6}  {:>10} {:>10} {:>10}  {:>8} {:>10}  {:>9}\n", "trial", "seed", "(a) busbw",
                     "(b) busbw", "ideal", "(b)/(a)", "(b)/ideal", "(b) load");
}

TrialResult trial_result(int trial, uint32_t seed, const AllreduceRun& a, const AllreduceRun& b, double ideal,
                         const routing::LoadReport& check) {
  TrialResult r;
  r.trial = trial;
  r.hash_seed = seed;
  r.busbw_a = a.busbw_Bps;
  r.busbw_b = b.busbw_Bps;
  r.seconds_a = a.seconds;
  r.seconds_b = b.seconds;
  r.ideal = ideal;
  r.max_load_b = check.max_load;
  r.lower_bound_b = check.max_lower_bound;
  r.rounds_b = check.max_rounds;
  for (const auto& st : check.steps) {
    r.steps_in_rounds_b += st.rounds > 1;
    r.steps_above_bound_b += !routing::at_bound(st);
    r.single_round_bound_b = std::max(r.single_round_bound_b, st.single_round_bound);
  }
  return r;
}

std::string trial_row(const TrialResult& t) {
  std::string note;
  if (t.failed_link) {
    note = t.ideal_intact ? "one link failed: bound from the surviving links, ideal of the intact fabric (the plan "
                            "missed a bound)"
                          : "one link failed: ideal and bound from the surviving links";
  }
  if (t.rounds_b > 1) {
    note += fmt::format("{}{} step{} in {} rounds, load per round (one round: bound {})", note.empty() ? "" : "; ",
                        t.steps_in_rounds_b, t.steps_in_rounds_b == 1 ? "" : "s", t.rounds_b, t.single_round_bound_b);
  }
  const std::string seeds = t.hash_seeds > 1 ? fmt::format("{}-{}", t.hash_seed, t.hash_seed + t.hash_seeds - 1)
                                             : std::to_string(t.hash_seed);
  return fmt::format("{:>5} {:>6}  {:>10.1f} {:>10.1f} {:>10.1f}  {:>8.2f} {:>10.2f}  {:>4} / {:<3}{}\n",
                     t.failed_link ? "fail" : std::to_string(t.trial), seeds, mbit(t.busbw_a), mbit(t.busbw_b),
                     mbit(t.ideal), t.busbw_b / t.busbw_a, t.busbw_b / t.ideal, t.max_load_b, t.lower_bound_b,
                     note.empty() ? "" : "  (" + note + ")");
}

std::string summary(const std::vector<TrialResult>& trials) {
  std::vector<double> ratio, vs_ideal;
  for (const TrialResult* t : intact(trials)) {
    ratio.push_back(t->busbw_b / t->busbw_a);
    vs_ideal.push_back(t->busbw_b / t->ideal);
  }
  if (ratio.empty()) return "";
  const Stats r = stats(ratio), v = stats(vs_ideal);
  return fmt::format("over {} trial{}: (b)/(a) mean {:.2f} (min {:.2f}, max {:.2f});  (b)/ideal mean {:.2f} "
                     "(min {:.2f}, max {:.2f})\n",
                     r.n, r.n == 1 ? "" : "s", r.mean, r.lo, r.hi, v.mean, v.lo, v.hi);
}

std::string utilisation_table(const TrialResult& t) {
  const topo::Fabric& f = t.fabric;
  std::string out = fmt::format("{:<12} {:>9} {:>5}   {:>9} {:>5}\n", "link", "(a) up", "down", "(b) up", "down");
  std::vector<double> hosts_a, hosts_b;
  for (size_t l = 0; l < f.links.size(); ++l) {
    const auto& link = f.links[l];
    const int d = static_cast<int>(2 * l);
    if (!f.is_switch_vertex(link.a) || !f.is_switch_vertex(link.b)) {
      // Host links: the busier direction, summarised below.
      if (!t.util_a.empty()) hosts_a.push_back(std::max(t.util_a[d], t.util_a[d + 1]));
      if (!t.util_b.empty()) hosts_b.push_back(std::max(t.util_b[d], t.util_b[d + 1]));
      continue;
    }
    // Spine-leaf links as built by the inference: a = spine, b = leaf, so
    // direction 2l is down (spine -> leaf) and 2l+1 up.
    const bool a_spine = f.switches[static_cast<size_t>(f.vertex_switch(link.a))].tier == topo::kTierSpine;
    const int up = a_spine ? d + 1 : d, down = a_spine ? d : d + 1;
    const std::string name = fmt::format("{} - {}", f.vertex_name(a_spine ? link.a : link.b),
                                         f.vertex_name(a_spine ? link.b : link.a));
    if (link.state == topo::LinkState::kDown) {
      out += fmt::format("{:<12} {:>9} {:>5}   {:>9}\n", name, pct(t.util_a, up), pct(t.util_a, down), "failed");
      continue;
    }
    out += fmt::format("{:<12} {:>9} {:>5}   {:>9} {:>5}\n", name, pct(t.util_a, up), pct(t.util_a, down),
                       pct(t.util_b, up), pct(t.util_b, down));
  }
  const Stats a = stats(hosts_a), b = stats(hosts_b);
  out += fmt::format("host links (busier direction): (a) mean {:.0f}% max {:.0f}%   (b) mean {:.0f}% max {:.0f}%\n",
                     100 * a.mean, 100 * a.hi, 100 * b.mean, 100 * b.hi);
  return out;
}

std::string results_json(const DemoConfig& cfg, const std::vector<TrialResult>& trials, double total_seconds) {
  nlohmann::json runs = nlohmann::json::array();
  std::vector<double> ratio, vs_ideal;
  for (const auto& t : trials) {
    runs.push_back({{"trial", t.trial}, {"hash_seed", t.hash_seed}, {"hash_seeds", t.hash_seeds},
                    {"failed_link", t.failed_link},
                    {"busbw_a_Bps", t.busbw_a}, {"busbw_b_Bps", t.busbw_b}, {"ideal_Bps", t.ideal},
                    {"seconds_a", t.seconds_a}, {"seconds_b", t.seconds_b}, {"ratio", t.busbw_b / t.busbw_a},
                    {"b_over_ideal", t.busbw_b / t.ideal}, {"max_load_b", t.max_load_b},
                    {"lower_bound_b", t.lower_bound_b}, {"rounds_b", t.rounds_b},
                    {"steps_in_rounds_b", t.steps_in_rounds_b}, {"single_round_bound_b", t.single_round_bound_b},
                    {"steps_above_bound_b", t.steps_above_bound_b}});
    if (!t.failed_link) ratio.push_back(t.busbw_b / t.busbw_a), vs_ideal.push_back(t.busbw_b / t.ideal);
  }
  const Stats r = stats(ratio), v = stats(vs_ideal);
  nlohmann::json j = {
      {"fabric", cfg.fabric == "rail"
                     ? nlohmann::json{{"kind", "rail"}, {"planes", cfg.planes}, {"rails", cfg.rails},
                                      {"hosts", cfg.rail_hosts}, {"leaves_per_rail", DemoConfig::kRailLeaves},
                                      {"spines_per_plane", DemoConfig::kRailSpines}, {"rate_mbit", cfg.rate_mbit},
                                      {"mtu", cfg.mtu}}
                     : nlohmann::json{{"spines", cfg.spines}, {"leaves", cfg.leaves},
                                      {"hosts_per_leaf", cfg.hosts_per_leaf}, {"rate_mbit", cfg.rate_mbit},
                                      {"mtu", cfg.mtu}}},
      {"bytes", cfg.bytes},
      {"trials", runs},
      {"summary", {{"ratio_mean", r.mean}, {"ratio_min", r.lo}, {"ratio_max", r.hi}, {"b_over_ideal_mean", v.mean},
                   {"b_over_ideal_min", v.lo}, {"b_over_ideal_max", v.hi}}},
      {"seconds", total_seconds}};
  return j.dump(2) + "\n";
}

}  // namespace weft::cli::demo
