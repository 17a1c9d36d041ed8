// HugeBuffer (huge_buffer.h).
#include "weft/common/huge_buffer.h"

#include "weft/common/huge_pages.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace weft {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;  // x86-64 PMD size

struct Pool {
  std::mutex mu;
  size_t cap = 0, held = 0;
  std::vector<std::pair<char*, size_t>> free;  // (memory, capacity)
};
Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

HugeBuffer::HugeBuffer(size_t bytes) {
  if (bytes == 0) return;
  {
    // Best fit among the recycled buffers.
    Pool& p = pool();
    std::lock_guard<std::mutex> l(p.mu);
    size_t best = p.free.size();
    for (size_t i = 0; i < p.free.size(); ++i) {
      if (p.free[i].second >= bytes && (best == p.free.size() || p.free[i].second < p.free[best].second)) best = i;
    }
    if (best < p.free.size()) {
      data_ = p.free[best].first;
      capacity_ = p.free[best].second;
      p.held -= capacity_;
      p.free.erase(p.free.begin() + static_cast<std::ptrdiff_t>(best));
    }
  }
  if (!data_) {
    const size_t align = bytes >= kHugePage ? kHugePage : alignof(std::max_align_t);
    void* mem = nullptr;
    if (::posix_memalign(&mem, align, bytes) != 0) throw std::bad_alloc();
    if (align == kHugePage) advise_huge_pages(mem, bytes);
    data_ = static_cast<char*>(mem);
    capacity_ = bytes;
  }
  std::memset(data_, 0, bytes);
  size_ = bytes;
}

HugeBuffer::~HugeBuffer() { release(); }

HugeBuffer::HugeBuffer(HugeBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), capacity_(std::exchange(o.capacity_, 0)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    capacity_ = std::exchange(o.capacity_, 0);
  }
  return *this;
}

void HugeBuffer::release() {
  if (!data_) return;
  {
    Pool& p = pool();
    std::lock_guard<std::mutex> l(p.mu);
    if (p.held + capacity_ <= p.cap) {
      p.free.emplace_back(data_, capacity_);
      p.held += capacity_;
      data_ = nullptr;
    }
  }
  std::free(data_);  // nullptr when kept
  data_ = nullptr;
  size_ = capacity_ = 0;
}

void HugeBuffer::set_recycling(size_t cap_bytes) {
  Pool& p = pool();
  std::lock_guard<std::mutex> l(p.mu);
  p.cap = cap_bytes;
  while (p.held > p.cap && !p.free.empty()) {
    std::free(p.free.back().first);
    p.held -= p.free.back().second;
    p.free.pop_back();
  }
}

}  // namespace weft
