// Registration cache: memory regions keyed by address range.
//
// ibv_reg_mr pins pages and costs tens of microseconds to milliseconds, so a
// buffer used again must not be registered again. get() returns a registration
// covering [addr, addr + len) with at least the requested access, registering
// (page-aligned) on a miss. Entries are shared: an entry evicted (LRU, beyond
// max_entries) or invalidated while a work request still uses it is
// deregistered when its last user lets go.
//
// Contract (as for NCCL's ncclCommRegister): a cached range must stay mapped
// at the same address until invalidate() is called for it. A cache keyed by
// virtual address cannot see free()+mmap() reusing an address with new pages;
// the verbs transport therefore caches only memory it owns or that the user
// registered explicitly, and stages everything else (connection.h).
//
//   MrCache cache(registrar, {.max_entries = 64});
//   WEFT_ASSIGN_OR_RETURN(auto mr, cache.get(buf, len, IBV_ACCESS_LOCAL_WRITE));
//   sge.lkey = mr->lkey;
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

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

struct MrCacheConfig {
  std::size_t max_entries = 256;
};

class MrCache {
 public:
  struct Entry {
    std::uintptr_t begin = 0;
    std::uintptr_t end = 0;
    int access = 0;
    std::uint32_t lkey = 0;
    std::uint32_t rkey = 0;
  };
  using EntryRef = std::shared_ptr<const Entry>;

  struct Stats {
    std::uint64_t hits = 0, misses = 0, evictions = 0, invalidations = 0;
  };

  MrCache(MemoryRegistrar& registrar, MrCacheConfig config);
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  Result<EntryRef> get(const void* addr, std::size_t len, int access);
  // A cached entry covering the range with the access, or null; never registers.
  EntryRef find(const void* addr, std::size_t len, int access);
  // Drops every entry overlapping [addr, addr + len); in-flight users keep
  // theirs alive until they let go. Returns how many entries were dropped.
  std::size_t invalidate(const void* addr, std::size_t len);

  Stats stats() const;
  std::size_t size() const;

 private:
  struct Slot {
    EntryRef entry;
    std::uint64_t last_use = 0;
  };
  void evict_if_full();
  EntryRef find_locked(std::uintptr_t begin, std::uintptr_t end, int access);

  MemoryRegistrar& registrar_;
  MrCacheConfig config_;
  mutable std::mutex mu_;
  std::map<std::uintptr_t, Slot> by_begin_;
  std::uint64_t clock_ = 0;
  Stats stats_;
};

}  // namespace weft::verbs
