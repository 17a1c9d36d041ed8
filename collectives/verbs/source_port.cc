#include "weft/verbs/source_port.h"

#include <fmt/format.h>

namespace weft::verbs {

Result<std::uint32_t> flow_label_for_sport(std::uint32_t sport) {
  if (sport > 0xFFFF) return invalid_argument(fmt::format("source port {} is not a UDP port", sport));
  if (sport <= kRoceSportBase) {
    return invalid_argument(fmt::format(
        "planned source port {} cannot be set on RoCE v2: the kernel derives the UDP source port "
        "from the GRH flow label and can only produce 49153..65535 (rdma_flow_label_to_udp_sport; "
        "49152 needs flow label 0, which means 'hash the QP numbers'); plan ports in 49153..65535",
        sport));
  }
  std::uint32_t fl = sport - kRoceSportBase;
  return fl;
}

}  // namespace weft::verbs
