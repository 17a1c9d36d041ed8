#include "weft/verbs/memory_region.h"

#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "weft/verbs/error.h"

namespace weft::verbs {

Result<MemoryRegistrar::Region> PdRegistrar::register_region(void* addr, std::size_t len, int access) {
  ibv_mr* mr = ibv_reg_mr(pd_, addr, len, access);
  if (mr == nullptr) return verbs_errno_error(fmt::format("ibv_reg_mr({} bytes)", len));
  return Region{mr, mr->lkey, mr->rkey};
}

Status PdRegistrar::deregister_region(void* handle) {
  if (int rc = ibv_dereg_mr(static_cast<ibv_mr*>(handle)); rc != 0) return verbs_call_error("ibv_dereg_mr", rc);
  return ok_status();
}

Result<RegionRef> register_region(MemoryRegistrar& registrar, const void* addr, std::size_t len, int access) {
  if (len == 0) return invalid_argument("cannot register an empty range");
  static const std::uintptr_t page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(addr);
  if (len > UINTPTR_MAX - page || begin > UINTPTR_MAX - page - len) {
    return invalid_argument(
        fmt::format("cannot register {} bytes at {:#x}: the range wraps the address space", len, begin));
  }
  // Whole pages: what the device pins anyway, and what check_region
  // (connection.cc) compares a message's range with.
  const std::uintptr_t rbegin = begin & ~(page - 1);
  const std::uintptr_t rend = (begin + len + page - 1) & ~(page - 1);
  WEFT_ASSIGN_OR_RETURN(MemoryRegistrar::Region region,
                        registrar.register_region(reinterpret_cast<void*>(rbegin), rend - rbegin, access));
  MemoryRegistrar* reg = &registrar;
  void* handle = region.handle;
  return RegionRef(new MemoryRegion{rbegin, rend, access, region.lkey, region.rkey},
                   [reg, handle](const MemoryRegion* r) {
                     Status s = reg->deregister_region(handle);
                     if (!s.is_ok()) {
                       spdlog::error("weft verbs: deregistering [{:#x}, {:#x}): {}", r->begin, r->end, s.message());
                     }
                     delete r;
                   });
}

}  // namespace weft::verbs
