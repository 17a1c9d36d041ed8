// The DPDK sender (optional: -DWEFT_WITH_DPDK=AUTO|ON|OFF). Without DPDK the
// backend reports that it was not built and how to get it.
#include "weft/probe/backend.h"
#include "weft/probe/config.h"

#if WEFT_HAVE_DPDK
#error "DPDK sender: see dpdk_sender.cc"
#else
namespace weft::probe {
Result<std::unique_ptr<SenderBackend>> make_dpdk_sender(const SenderConfig&) {
  return unimplemented(
      "weft was built without DPDK: apt-get install libdpdk-dev, then reconfigure with -DWEFT_WITH_DPDK=ON");
}
}  // namespace weft::probe
#endif
