// The demo in the flow-level simulator: for machines where network
// namespaces cannot be built (not root), on the same fabric and allocation.
#pragma once

#include "demo_config.h"

namespace weft::cli::demo {

Status run_simulated(const DemoConfig& cfg);

}  // namespace weft::cli::demo
