// Memory regions: one ibv_reg_mr per registration, shared by the work
// requests that use it and deregistered when the last of them lets go.
//
// There is deliberately no cache keyed by address. A registration pins the
// physical pages under a virtual range; once the range is unmapped and mapped
// again (free() + malloc() reusing an address, munmap() + mmap(MAP_FIXED)),
// the address shows new pages while the region still points at the old ones,
// and RDMA moves those: silent wrong results. Userspace cannot see that
// happen: rdma-core has no MMU notifier for applications, and on-demand
// paging (IBV_ACCESS_ON_DEMAND), which follows the page tables, is missing on
// many devices (rxe among them). So a region lives only as long as its owner
// promises the pages stay: memory the library owns, a buffer the application
// registered explicitly (coll::Communicator::register_buffer), or a single
// call (the communicator registers a caller's buffer per call or copies it).
//
//   WEFT_ASSIGN_OR_RETURN(RegionRef mr, register_region(registrar, buf, len, IBV_ACCESS_LOCAL_WRITE));
//   sge.lkey = mr->lkey;   // the region is deregistered when the last RegionRef goes
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "weft/common/status.h"

namespace weft::verbs {

// Registers and deregisters memory; the real one wraps a protection domain,
// tests count calls.
class MemoryRegistrar {
 public:
  struct Region {
    void* handle = nullptr;  // ibv_mr* for the real registrar
    std::uint32_t lkey = 0;
    std::uint32_t rkey = 0;
  };
  virtual ~MemoryRegistrar() = default;
  virtual Result<Region> register_region(void* addr, std::size_t len, int access) = 0;
  virtual Status deregister_region(void* handle) = 0;
};

class PdRegistrar final : public MemoryRegistrar {
 public:
  explicit PdRegistrar(ibv_pd* pd) : pd_(pd) {}
  Result<Region> register_region(void* addr, std::size_t len, int access) override;
  Status deregister_region(void* handle) override;

 private:
  ibv_pd* pd_;
};

// A registered range: whole pages [begin, end) with `access`.
struct MemoryRegion {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  int access = 0;
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
};
using RegionRef = std::shared_ptr<const MemoryRegion>;

// Registers the whole pages holding [addr, addr + len) with `access`; the
// region is deregistered (a failure is logged) when the last reference is
// released, which the registrar must outlive.
Result<RegionRef> register_region(MemoryRegistrar& registrar, const void* addr, std::size_t len, int access);

}  // namespace weft::verbs
