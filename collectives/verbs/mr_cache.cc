#include "weft/verbs/mr_cache.h"

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
  return Status::ok();
}

MrCache::MrCache(MemoryRegistrar& registrar, MrCacheConfig config) : registrar_(registrar), config_(config) {}

MrCache::~MrCache() {
  // Entries still held elsewhere deregister when released; the registrar must
  // outlive them (the transport context owns both, cache last).
  std::lock_guard lock(mu_);
  by_begin_.clear();
}

Result<MrCache::EntryRef> MrCache::get(const void* addr, std::size_t len, int access) {
  if (len == 0) return invalid_argument("cannot register an empty range");
  auto begin = reinterpret_cast<std::uintptr_t>(addr);
  std::uintptr_t end = begin + len;
  std::lock_guard lock(mu_);
  if (EntryRef hit = find_locked(begin, end, access)) return hit;
  ++stats_.misses;
  // Register whole pages: neighbouring buffers on the same pages then hit.
  static const std::uintptr_t page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  std::uintptr_t rbegin = begin & ~(page - 1);
  std::uintptr_t rend = (end + page - 1) & ~(page - 1);
  WEFT_ASSIGN_OR_RETURN(MemoryRegistrar::Region region,
                        registrar_.register_region(reinterpret_cast<void*>(rbegin), rend - rbegin, access));
  MemoryRegistrar* reg = &registrar_;
  void* handle = region.handle;
  auto* raw = new Entry{rbegin, rend, access, region.lkey, region.rkey};
  EntryRef ref(raw, [reg, handle](const Entry* e) {
    Status s = reg->deregister_region(handle);
    if (!s.is_ok()) spdlog::error("weft verbs: deregistering [{:#x}, {:#x}): {}", e->begin, e->end, s.message());
    delete e;
  });
  // A narrower or weaker entry at the same begin is replaced.
  by_begin_[rbegin] = Slot{ref, ++clock_};
  evict_if_full();
  return ref;
}

MrCache::EntryRef MrCache::find_locked(std::uintptr_t begin, std::uintptr_t end, int access) {
  // The candidate is the entry with the greatest begin <= addr.
  auto it = by_begin_.upper_bound(begin);
  if (it == by_begin_.begin()) return nullptr;
  --it;
  const Entry& e = *it->second.entry;
  if (e.end < end || (e.access & access) != access) return nullptr;
  ++stats_.hits;
  it->second.last_use = ++clock_;
  return it->second.entry;
}

MrCache::EntryRef MrCache::find(const void* addr, std::size_t len, int access) {
  auto begin = reinterpret_cast<std::uintptr_t>(addr);
  std::lock_guard lock(mu_);
  return find_locked(begin, begin + len, access);
}

void MrCache::evict_if_full() {
  while (by_begin_.size() > config_.max_entries) {
    auto victim = by_begin_.begin();
    for (auto it = by_begin_.begin(); it != by_begin_.end(); ++it) {
      if (it->second.last_use < victim->second.last_use) victim = it;
    }
    by_begin_.erase(victim);
    ++stats_.evictions;
  }
}

std::size_t MrCache::invalidate(const void* addr, std::size_t len) {
  auto begin = reinterpret_cast<std::uintptr_t>(addr);
  std::uintptr_t end = begin + len;
  std::lock_guard lock(mu_);
  std::size_t dropped = 0;
  for (auto it = by_begin_.begin(); it != by_begin_.end();) {
    const Entry& e = *it->second.entry;
    if (e.begin < end && begin < e.end) {
      it = by_begin_.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  stats_.invalidations += dropped;
  return dropped;
}

MrCache::Stats MrCache::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::size_t MrCache::size() const {
  std::lock_guard lock(mu_);
  return by_begin_.size();
}

}  // namespace weft::verbs
