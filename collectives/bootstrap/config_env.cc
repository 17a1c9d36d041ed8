#include "bootstrap/config_env.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "plan_epochs.h"

namespace weft::coll::internal {
const char* env_value(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

Status apply_environment(CommConfig& c) {
  // Without a plan, an epochs file has nothing to start from: ignored.
  if (const char* v = env_value("WEFT_PLAN_EPOCHS"); v && c.plan_epochs.empty() && c.plan) c.plan_epochs = v;
  // A plan of Q connections per pair (weft route --qps-per-connection Q)
  // sets connections_per_peer where the caller left the default of 1.
  if (c.plan && c.tcp.connections_per_peer == 1) c.tcp.connections_per_peer = plan_connections(*c.plan);
  if (const char* v = env_value("WEFT_JOB"); v && c.job.empty()) c.job = v;
  if (c.job.empty()) c.job = c.store_prefix;
  if (const char* v = env_value("WEFT_IN_CALL_SWITCH")) {
    if (std::string_view(v) != "0" && std::string_view(v) != "1") {
      return invalid_argument(fmt::format("WEFT_IN_CALL_SWITCH must be 0 or 1 (got '{}')", v));
    }
    c.in_call_switch = *v == '1';
  }
  if (const char* v = env_value("WEFT_SWITCH_STALL_MS")) {
    char* end = nullptr;
    const long ms = std::strtol(v, &end, 10);
    if (*end != '\0' || ms <= 0) return invalid_argument(fmt::format("WEFT_SWITCH_STALL_MS must be a number of ms (got '{}')", v));
    if (ms < 10 || ms > 60000) {
      return invalid_argument(fmt::format("WEFT_SWITCH_STALL_MS must be in [10, 60000] ms (got '{}')", v));
    }
    c.switch_stall = std::chrono::milliseconds(ms);
  }
  if (const char* v = env_value("WEFT_VERBS_DEVICES"); v && c.verbs.device.empty() && c.verbs.devices.empty()) {
    const std::string_view list = v;
    for (size_t pos = 0; pos <= list.size();) {
      const size_t comma = std::min(list.find(',', pos), list.size());
      if (comma == pos) {
        return invalid_argument(
            fmt::format("WEFT_VERBS_DEVICES must be comma-separated device names, none empty (got '{}')", v));
      }
      c.verbs.devices.emplace_back(list.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  return ok_status();
}

}  // namespace weft::coll::internal
