// What a weft process group takes from the environment (docs/torch.md,
// "Environment"). Read when each group is created; a bad value fails
// init_process_group / new_group with a message naming the variable.
//
//   WEFT_TRANSPORT   auto (default: shared memory between ranks of one host,
//                    TCP to the others), tcp, shm
//   WEFT_PLAN        a route plan (weft route -o plan.json); applied to the
//                    default group, whose ranks are the plan's
//   WEFT_HOST        this rank's host identity (default: the hostname);
//                    ranks with equal values share memory
// The library reads WEFT_LISTEN_ADDR and WEFT_SOCKET_IFNAME itself
// (TcpOptions::listen_address in weft/collectives/transport.h).
#pragma once

#include <optional>
#include <string>

#include "weft/common/status.h"
#include "weft/routing/plan.h"

namespace weft::pt {

struct BackendOptions {
  std::string transport = "auto";
  std::string host;  // "" = gethostname()
  std::optional<routing::RoutePlan> plan;
  std::string plan_path;
};

Result<BackendOptions> backend_options_from_env();

}  // namespace weft::pt
