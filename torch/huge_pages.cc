#include "huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <utility>

// Older C libraries do not name it; the value is the kernel's ABI
// (include/uapi/asm-generic/mman-common.h).
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

namespace weft::pt {
namespace {

// A range whose collapse failed is not tried again: MADV_COLLAPSE reclaims
// and compacts memory before it gives up for want of huge pages (EAGAIN,
// ENOMEM; madvise(2)), which a training loop would pay on every call; EINVAL
// (a kernel before 6.1, THP "never", a file mapping) will not change either.
std::mutex g_mu;
std::set<std::pair<uintptr_t, uintptr_t>> g_failed;  // kept small: cleared at kMaxFailed
constexpr size_t kMaxFailed = 256;

}  // namespace

void prefer_huge_pages(void* p, size_t bytes) {
  if (bytes < kHugePagesMinBytes) return;
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto at = reinterpret_cast<uintptr_t>(p);
  const uintptr_t b = (at + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t e = (at + bytes) & ~(kHuge - 1);
  if (e <= b) return;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_failed.count({b, e})) return;
  }
  if (::madvise(reinterpret_cast<void*>(b), e - b, MADV_COLLAPSE) == 0) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_failed.size() >= kMaxFailed) g_failed.clear();
  g_failed.insert({b, e});
}

}  // namespace weft::pt
