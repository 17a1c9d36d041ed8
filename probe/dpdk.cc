// A build without DPDK (-DWEFT_WITH_DPDK=OFF, or AUTO without libdpdk-dev):
// the dpdk backend says it was not built and how to get it; tests skip on it.
// The backend itself is dpdk_sender.cc.
#include "weft/probe/backend.h"
#include "weft/probe/config.h"

#if WEFT_HAVE_DPDK
#error "built with DPDK: probe/CMakeLists.txt compiles dpdk_sender.cc instead"
#else
namespace weft::probe {
namespace {
constexpr const char* kNoDpdk =
    "weft was built without DPDK: apt-get install libdpdk-dev, then reconfigure with -DWEFT_WITH_DPDK=ON";
}
Result<std::unique_ptr<SenderBackend>> make_dpdk_sender(const SenderConfig&) { return unimplemented(kNoDpdk); }
Status dpdk_available() { return unimplemented(kNoDpdk); }
}  // namespace weft::probe
#endif
