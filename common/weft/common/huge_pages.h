// Transparent huge pages for large buffers that are about to be filled.
//
// The first touch of anonymous memory costs a page fault per 4 KiB page, and
// in a virtual machine a fault is expensive: planning 16,384 endpoints
// writes ~50 MB of plan, and on the development VM its ~12,000 faults took
// longer than all of the planner's arithmetic (bench/routing_bench,
// BM_PlanHd). With transparent huge pages in "madvise" or "always" mode,
// madvise(MADV_HUGEPAGE) lets the kernel fault such a range in 2 MiB at a
// time (Linux Documentation/admin-guide/mm/transhuge.rst). It is advice:
// with THP off, or on memory already touched, nothing changes, and a failed
// call is ignored.
//
// Not always a win: where the hypervisor takes back free 2 MiB blocks
// (virtio-balloon free page reporting), a fresh huge page is faulted in by
// the host too, and filling 2 GiB of new memory took 4.2 s on huge pages
// against 0.75 s on 4 KiB ones on the development VM; memory freed moments
// before is 6-7x faster to fill on huge pages
// (bench/results/2026-11-27-planner-memory.md). Advise buffers that are
// reused (HugeBuffer's recycling), not one-shot ones.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft {

// Advises the 2 MiB-aligned part of [p, p + bytes).
inline void advise_huge_pages(const void* p, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto at = reinterpret_cast<uintptr_t>(p);
  const uintptr_t b = (at + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t e = (at + bytes) & ~(kHuge - 1);
  if (e > b) (void)::madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);
}

// v.reserve(n), advising the new storage when it is large (>= 4 MiB) and
// nothing of it has been written yet (v was empty).
template <class T>
void reserve_huge(std::vector<T>& v, size_t n) {
  const bool fresh = v.empty() && v.capacity() < n;
  v.reserve(n);
  if (fresh && n * sizeof(T) >= (size_t{4} << 20)) advise_huge_pages(v.data(), n * sizeof(T));
}

}  // namespace weft
