// HugeBuffer: a large zero-filled byte buffer on transparent huge pages where
// the kernel offers them, for collective data and scratch of many MiB.
//
//   weft::HugeBuffer scratch(64 << 20);   // 32 faults of 2 MiB instead of 16384 of 4 KiB
//   std::memcpy(scratch.data(), src, n);
//
// Why: every first touch of a 4 KiB page is a fault; measured here (a VM,
// THP mode "madvise"), zeroing a fresh 64 MiB std::vector took 0.4-0.7 s,
// the same bytes 2 MiB-aligned and advised (huge_pages.h) 13-25 ms. Below
// 2 MiB, or where THP is off, it is an ordinary aligned allocation.
//
// Recycling (off by default): a process that creates communicator after
// communicator (weft demo's rank worker) can keep freed buffers and get them
// back, zeroed, instead of faulting new pages in. On this VM 16 processes
// faulting in parallel took 0.7-1.9 s for 16 MiB each, one alone 2 ms.
#pragma once

#include <cstddef>

namespace weft {

class HugeBuffer {
 public:
  HugeBuffer() = default;
  // Zero-filled; throws std::bad_alloc like std::vector when memory runs out.
  explicit HugeBuffer(size_t bytes);
  ~HugeBuffer();
  HugeBuffer(HugeBuffer&& o) noexcept;
  HugeBuffer& operator=(HugeBuffer&& o) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;

  char* data() { return data_; }
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Keep up to cap_bytes of freed buffers for reuse (0 = off, frees them).
  static void set_recycling(size_t cap_bytes);

 private:
  void release();
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace weft
