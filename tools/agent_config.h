// `weft agent --config FILE`: a TOML file (https://toml.io/en/v1.0.0) whose
// keys are the agent's command-line flags without the leading "--":
//
//   # /etc/weft/agent.toml
//   secret-file = "/etc/weft/secret"
//   ip = "10.0.1.1"
//   metrics = "127.0.0.1:9740"
//   log-level = "info"
//
// The flags themselves are the one table of settings: a key is accepted when
// the `agent` subcommand has a flag of that name, and its value goes through
// that flag's own conversion and checks, so a setting means the same in the
// file and on the command line. A flag given on the command line overrides
// the file. Unknown keys, tables and values the flag refuses are errors that
// name the file and the key.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <vector>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "weft/agent/agent.h"
#include "weft/common/status.h"

namespace weft::cli {

// Flags that make no sense in a file (--config itself, --help, --print-config).
bool command_line_only(std::string_view key);

// The keys (flag names without "--") given on the command line of `cmd`.
std::set<std::string> keys_given(const CLI::App& cmd);

// Sets every flag of `cmd` that `path` names and that is not in `given`.
Status apply_config_file(CLI::App& cmd, const std::string& path, const std::set<std::string>& given);

// SIGHUP: clears what the file set before, calls `restore` (which puts the
// flags' variables back to their command-line values) and applies `path`
// again. Returns the keys whose value changed.
Result<std::set<std::string>> reapply_config_file(CLI::App& cmd, const std::string& path,
                                                  const std::set<std::string>& given,
                                                  const std::function<void()>& restore);

// "ADDR:PORT" with an IPv4 address and a whole number 0..65535 as the port.
Result<std::pair<std::string, uint16_t>> parse_address_port(std::string_view s, std::string_view flag);

// The effective configuration, as `weft agent --print-config` shows it. The
// secret appears as a fingerprint: an HMAC of a fixed label under it, which
// tells two secrets apart and reveals neither.
struct ServiceSettings {
  std::string metrics;  // "" = off
  std::string log_level;
  double drain_timeout_s = 0;
};
std::string describe_config(const agent::AgentConfig& cfg, const ServiceSettings& svc);

}  // namespace weft::cli
