// Printing link-load reports as tables (weft check, weft demo).
#pragma once

#include <string>

#include "weft/routing/link_load.h"

namespace weft::cli {

// One row per step: phase, distance, flows, cross-leaf flows, max load, bound.
std::string format_load_table(const topo::Fabric& f, const routing::LoadReport& rep);

}  // namespace weft::cli
