// add_fleet_options, load_fleet (fleet_args.h).
#include "fleet_args.h"

#include "weft/agent/control.h"
#include "weft/common/file_util.h"

namespace weft::cli {

void add_fleet_options(CLI::App* cmd, FleetArgs& a) {
  cmd->add_option("--hosts", a.hosts, "Hosts file: 'name ip [control_port]' per line, '#' comments")->required();
  cmd->add_option("--secret-file", a.secret_file, "Shared secret of the agents (mode 600)")->required();
}

Result<Fleet> load_fleet(const FleetArgs& a) {
  WEFT_ASSIGN_OR_RETURN(std::string text, read_file(a.hosts));
  Fleet f;
  WEFT_ASSIGN_OR_RETURN(f.hosts, agent::parse_hosts(text, a.hosts));
  WEFT_ASSIGN_OR_RETURN(f.secret, agent::load_secret(a.secret_file));
  return f;
}

}  // namespace weft::cli
