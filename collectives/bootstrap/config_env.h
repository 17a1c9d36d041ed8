// The environment variables a communicator reads into its config
// (docs/collectives.md, "Environment"): where the code that makes the
// communicator has no field for them (the C API, the torch backend,
// launchers).
#pragma once

#include "weft/collectives/communicator.h"
#include "weft/common/status.h"

namespace weft::coll::internal {

// Fills what the config leaves unset (plan epochs file, job, RDMA devices,
// connections per peer from the plan) and overrides the in-call switch
// settings; a malformed value is an error naming the variable. Applying
// it twice gives what applying it once does: the C API calls it before it
// opens the store, so that a bad value fails before rank 0 serves peers,
// and Communicator::create calls it again.
Status apply_environment(CommConfig& c);

// The variable's value; nullptr when it is unset or empty.
const char* env_value(const char* name);

}  // namespace weft::coll::internal
