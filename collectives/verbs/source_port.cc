#include "weft/verbs/source_port.h"

#include <fmt/format.h>

namespace weft::verbs {

Result<std::uint32_t> flow_label_for_sport(std::uint32_t sport) {
  if (sport > 0xFFFF) return invalid_argument(fmt::format("source port {} is not a UDP port", sport));
  if (sport < kRoceSportBase) {
    return invalid_argument(fmt::format(
        "planned source port {} cannot be set on RoCE v2: the kernel derives the UDP source port "
        "from the GRH flow label and can only produce 49152..65535 (rdma_flow_label_to_udp_sport); "
        "plan ports in 49152..65535",
        sport));
  }
  // Label 0 means "hash the QP numbers": the next label that folds to 0xC000.
  if (sport == kRoceSportBase) return std::uint32_t{0x4001};
  return sport - kRoceSportBase;
}

}  // namespace weft::verbs
