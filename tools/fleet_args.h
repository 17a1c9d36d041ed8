// What every command that talks to the agents reads first: the hosts file
// and the shared secret (`weft probe`, `weft watch`).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "weft/agent/controller.h"
#include "weft/common/status.h"
#include "weft/probe/mac.h"

namespace weft::cli {

struct FleetArgs {
  std::string hosts;        // "name ip [control_port]" per line
  std::string secret_file;  // mode 600
};

struct Fleet {
  std::vector<agent::HostEntry> hosts;
  probe::MacKey secret;
};

// --hosts and --secret-file, both required.
void add_fleet_options(CLI::App* cmd, FleetArgs& a);
Result<Fleet> load_fleet(const FleetArgs& a);

}  // namespace weft::cli
