#include "huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

// Older C libraries do not name it; the value is the kernel's ABI
// (include/uapi/asm-generic/mman-common.h).
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

namespace weft::pt {

void prefer_huge_pages(void* p, size_t bytes) {
  if (bytes < kHugePagesMinBytes) return;
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto at = reinterpret_cast<uintptr_t>(p);
  const uintptr_t b = (at + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t e = (at + bytes) & ~(kHuge - 1);
  if (e <= b) return;
  void* start = reinterpret_cast<void*>(b);
  (void)::madvise(start, e - b, MADV_COLLAPSE);
}

}  // namespace weft::pt
