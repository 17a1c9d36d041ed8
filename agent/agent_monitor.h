// Internal to the agent (agent.cc): the thread body of a "monitor" order.
#pragma once

#include <atomic>
#include <functional>

#include <nlohmann/json.hpp>

#include "weft/agent/agent.h"
#include "weft/agent/control.h"

namespace weft::agent::internal {

// Probes cmd's tuples from cfg.probe_ip under `key` until *cancel, handing
// "monitor_report" frames (and a last "error" if the sender fails) to `post`;
// each report carries what `reflector` received of the run. The probes'
// sequences start at `next_sequence` (where an earlier monitor of the run on
// this host stopped: the reflectors drop sequences they have seen) and it is
// left where this one stops.
void run_monitor_order(const AgentConfig& cfg, const MonitorCommand& cmd, const probe::MacKey& key,
                       probe::Reflector& reflector, const std::function<void(nlohmann::json)>& post,
                       const std::atomic<bool>& cancel, std::atomic<uint32_t>& next_sequence);

}  // namespace weft::agent::internal
