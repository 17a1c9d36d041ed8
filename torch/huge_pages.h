// Large buffers on transparent huge pages before the library moves them.
//
// PyTorch's CPU allocator hands out 4 KiB pages (torch 1.13 has no option
// for more). The library's shared-memory transport copies messages of
// 1 MiB and more straight out of the peer's memory (process_vm_readv), and
// the kernel then looks up and pins every page of the message, each call:
// perf of a 2-rank 64 MiB AllReduce on torch tensors showed a fifth of the
// samples in the page walk (follow_page_pte, __get_user_pages,
// vm_normal_page, unpin_user_pages) and the copy itself slower (TLB misses),
// against under 1% with the library's own buffers, which are on huge pages
// (weft/common/huge_buffer.h); torch tensors on huge pages ran the call 1.5-2x
// faster on the same run. MADV_COLLAPSE (Linux 6.1, madvise(2)) moves a
// range onto huge pages at once, keeping its contents (a range not in
// memory yet comes in as huge pages), whatever the THP sysfs setting: the
// first call on a buffer pays about one copy of it, the later ones a system
// call that finds it collapsed. Not MADV_HUGEPAGE: it would flag the range
// on its mapping, splitting the heap's mapping at every tensor's edges.
#pragma once

#include <cstddef>

namespace weft::pt {

// Buffers from this size on are moved to huge pages: below it the 2 MiB-
// aligned part is a small share of the buffer, and messages stay below the
// transport's single-copy size.
inline constexpr size_t kHugePagesMinBytes = size_t{4} << 20;

// Collapses the 2 MiB-aligned part of [p, p + bytes) onto huge pages when
// bytes >= kHugePagesMinBytes. Best effort: a kernel without MADV_COLLAPSE,
// THP set to "never", or no free huge page leave the memory as it is, and
// a range that failed once is not tried again. Thread-safe.
void prefer_huge_pages(void* p, size_t bytes);

}  // namespace weft::pt
