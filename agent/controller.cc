// The controller's configuration: host lists, validation, the campaign spec.
#include <arpa/inet.h>

#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "weft/agent/controller.h"
#include "weft/common/ipv4.h"

namespace weft::agent {

using nlohmann::json;

Result<std::vector<HostEntry>> parse_hosts(const std::string& text, const std::string& origin) {
  std::vector<HostEntry> out;
  std::istringstream in(text);
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream ls(line);
    HostEntry e;
    std::string port;
    if (!(ls >> e.name)) continue;
    if (!(ls >> e.ip) || ipv4_or_zero(e.ip) == 0) {
      return invalid_argument(fmt::format("{}:{}: want 'name ipv4 [control_port]'", origin, no));
    }
    if (ls >> port) {
      char* end = nullptr;
      const long p = std::strtol(port.c_str(), &end, 10);
      if (*end || p < 1 || p > 65535) return invalid_argument(fmt::format("{}:{}: bad port '{}'", origin, no, port));
      e.control_port = static_cast<uint16_t>(p);
    }
    for (const auto& o : out) {
      if (o.name == e.name || o.ip == e.ip) {
        return invalid_argument(fmt::format("{}:{}: host {} / {} listed twice", origin, no, e.name, e.ip));
      }
    }
    out.push_back(e);
  }
  if (out.size() < 2) return invalid_argument(origin + ": a campaign needs at least 2 hosts");
  return out;
}

Status ProbeRunConfig::validate() const {
  WEFT_RETURN_IF_ERROR(probe::parse_method(method).status());
  if (backend != "udp" && backend != "tcp-syn" && backend != "dpdk") {
    return invalid_argument(fmt::format("unknown backend '{}' (udp, tcp-syn, dpdk)", backend));
  }
  if (probe_dscp > 63) return invalid_argument("probe DSCP must be <= 63 (6 bits)");
  if (stop_at_spines > 0 && probe_dscp + stop_at_spines > 63 && method == "dscp") {
    return invalid_argument(fmt::format("probe DSCP {} + {} spines > 63: DSCP cannot name them; use --method ttl",
                                        probe_dscp, stop_at_spines));
  }
  // The ranges every agent holds a campaign order to (control.cc
  // decode_campaign): a run the agents would refuse is refused here, before a
  // 'running' campaign row exists for it, naming the option of `weft probe`.
  const auto outside = [](const char* option, auto v, auto lo, auto hi) {
    return invalid_argument(fmt::format("{} {} is outside {}..{} (what an agent accepts)", option, v, lo, hi));
  };
  if (dport < 1) return outside("--dport", dport, 1, 65535);
  if (probes_per_port < 1 || probes_per_port > 1000) return outside("--probes", probes_per_port, 1, 1000);
  if (!(rate_pps >= 0 && rate_pps <= 1e9)) return outside("--rate", rate_pps, 0, "1e9");
  if (timeout_ms < 1 || timeout_ms > 60000) return outside("--timeout-ms", timeout_ms, 1, 60000);
  if (retries < 0 || retries > 100) return outside("--retries", retries, 0, 100);
  if (port_window < 1 || port_window > 4096) return outside("--port-window", port_window, 1, 4096);
  if (stop_at_spines < 0 || stop_at_spines > 63) return outside("--spines", stop_at_spines, 0, 63);
  if (ports_per_spine > 4096) return outside("--ports-per-spine", ports_per_spine, 0, 4096);
  if (batch_rows < 1) return invalid_argument("batch rows must be >= 1");
  if (keep_open_ms < 1) return invalid_argument(fmt::format("keep-open interval {} ms must be >= 1", keep_open_ms));
  probe::CampaignPlan p;
  p.targets = {1};
  p.sport_first = sport_first;
  p.sport_count = sport_count;
  p.probes_per_port = probes_per_port;
  p.rate_pps = rate_pps;
  p.timeout_ms = timeout_ms;
  p.retries = retries;
  p.port_window = port_window;
  p.stop_at_spines = stop_at_spines;
  p.ports_per_spine = std::max(1, ports_per_spine);
  if (ports_per_spine < 0) return invalid_argument(fmt::format("ports per spine must be >= 0 (0 = auto), got {}", ports_per_spine));
  return p.validate();
}

db::CampaignSpec ProbeRunConfig::spec(const std::vector<HostEntry>& hosts) const {
  db::CampaignSpec s;
  s.method = method;
  s.backend = backend;
  s.protocol = backend == "tcp-syn" ? 6 : 17;
  s.dport = dport;
  s.sport_first = sport_first;
  s.sport_count = sport_count;
  s.probes_per_port = probes_per_port;
  s.probe_dscp = probe_dscp;
  s.targeted = pairs.has_value();
  json h = json::array();
  for (const auto& e : hosts) h.push_back({e.name, e.ip, e.control_port});
  json cfg = {{"hosts", h}, {"rate", rate_pps}, {"timeout_ms", timeout_ms}, {"retries", retries},
              {"stop_at_spines", stop_at_spines}, {"ports_per_spine", ports_per_spine}};
  if (pairs) cfg["pairs"] = *pairs;
  s.config_json = cfg.dump();
  return s;
}

}  // namespace weft::agent
