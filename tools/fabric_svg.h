// An SVG picture of a fabric with the load of every link, for `weft demo`:
// switches in rows by tier (core, spine/aggregation, leaf), hosts below, each
// link a line whose colour and width show its utilisation (the busier of its
// two directions). Several panels (e.g. before and after) sit side by side.
#pragma once

#include <string>
#include <vector>

#include "weft/topology/fabric.h"

namespace weft::cli {

struct SvgPanel {
  std::string title;
  std::vector<double> utilisation;  // per directed link, 0..1 (may exceed 1 when oversubscribed)
  std::vector<int> down;            // links drawn down in this panel only (a failure between panels)
};

std::string fabric_svg(const topo::Fabric& f, const std::vector<SvgPanel>& panels);

}  // namespace weft::cli
