// The agent's side of monitoring (control.h "monitor"): the loop is
// probe::run_monitor; this opens its sender and turns tallies into frames.
#include "agent_monitor.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace weft::agent::internal {

void run_monitor_order(const AgentConfig& cfg, const MonitorCommand& cmd, const probe::MacKey& key,
                       probe::Reflector& reflector, const std::function<void(nlohmann::json)>& post,
                       const std::atomic<bool>& cancel, std::atomic<uint32_t>& next_sequence) {
  reflector.track_arrivals(cmd.run);
  struct Untrack {
    probe::Reflector& r;
    uint32_t run;
    ~Untrack() { r.untrack_arrivals(run); }
  } untrack{reflector, cmd.run};
  probe::SenderConfig sc;
  sc.local_ip = cfg.probe_ip;
  sc.dport = cmd.dport;
  sc.probe_dscp = cmd.probe_dscp;
  sc.run = cmd.run;
  sc.key = key;
  auto be = cfg.make_sender ? cfg.make_sender("udp", sc) : probe::make_sender("udp", sc);
  if (!be) {
    spdlog::error("monitor {}: {}", cmd.run, be.status().message());
    post({{"type", "error"}, {"run", cmd.run}, {"message", be.status().message()}});
    return;
  }
  spdlog::info("monitor {}: {} 5-tuples at {} probes/s", cmd.run, cmd.plan.tuples.size(), cmd.plan.rate_pps);
  probe::MonitorPlan plan = cmd.plan;
  plan.first_sequence = std::max(plan.first_sequence, next_sequence.load());
  uint32_t next = plan.first_sequence;
  const Status st = probe::run_monitor(**be, plan, [&](uint64_t t_ns, std::span<const probe::TupleTally> tallies) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& t : tallies) rows.push_back(encode_tally(t));
    nlohmann::json arrivals = nlohmann::json::array();
    for (const auto& [src, n] : reflector.arrivals(cmd.run)) arrivals.push_back({src.first, src.second, n});
    post({{"type", "monitor_report"}, {"run", cmd.run}, {"t_ns", t_ns}, {"rows", std::move(rows)},
          {"arrivals", std::move(arrivals)}});
  }, cancel, &next);
  next_sequence.store(next);
  if (!st) {
    spdlog::error("monitor {}: {}", cmd.run, st.message());
    post({{"type", "error"}, {"run", cmd.run}, {"message", st.message()}});
    return;
  }
  spdlog::info("monitor {}: stopped", cmd.run);
}

}  // namespace weft::agent::internal
