// Registered memory: the Registry, the application's registrations
// (Communicator::register_buffer / deregister, BufferRegistration), and
// where a call's buffer is placed for the transports (Impl::place_buffers).
#include "registry.h"

#include <cstring>

#include <fmt/format.h>

#include "communicator_impl.h"

namespace weft::coll {
namespace internal {

Result<uint64_t> Registry::add(const std::vector<std::unique_ptr<Transport>>& transports, void* data, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(data);
  if (data == nullptr) return invalid_argument("data is null");
  if (bytes == 0) return invalid_argument("bytes is 0: there is nothing to register");
  if (begin > UINTPTR_MAX - bytes) {
    return invalid_argument(fmt::format("{} bytes at {} wrap around the address space", bytes, data));
  }
  // Entries do not overlap: only the last one starting below the range's
  // end can reach into it.
  auto next = by_begin.lower_bound(begin + bytes);
  if (next != by_begin.begin()) {
    const auto& [b, e] = *std::prev(next);
    if (b + e.bytes > begin) {
      return invalid_argument(fmt::format("[{}, +{}) overlaps the registration [{:#x}, +{})", data, bytes, b, e.bytes));
    }
  }
  Entry e;
  e.bytes = bytes;
  for (const auto& t : transports) {
    auto m = t->register_memory(data, bytes);
    if (!m) return m.status().with_context(fmt::format("registering {} bytes with {}", bytes, t->name()));
    e.by_transport.push_back(std::move(*m));
  }
  e.id = ++last_id;
  by_begin.emplace(begin, std::move(e));
  return last_id;
}

bool Registry::remove(const void* data, uint64_t id) {
  auto it = by_begin.find(reinterpret_cast<uintptr_t>(data));
  if (it == by_begin.end() || it->second.id != id) return false;
  by_begin.erase(it);
  return true;
}

Registry::Map::const_iterator Registry::find(const void* data, size_t bytes) const {
  const auto begin = reinterpret_cast<uintptr_t>(data);
  auto it = by_begin.upper_bound(begin);
  if (it == by_begin.begin()) return end();
  --it;
  return begin - it->first <= it->second.bytes && bytes <= it->second.bytes - (begin - it->first) ? it : end();
}

}  // namespace internal

BufferRegistration::BufferRegistration(BufferRegistration&& o) noexcept
    : registry_(std::move(o.registry_)), data_(o.data_), size_(o.size_), id_(o.id_) {
  o.registry_.reset();
  o.id_ = 0;
}

BufferRegistration& BufferRegistration::operator=(BufferRegistration&& o) noexcept {
  if (this != &o) {
    release();
    registry_ = std::move(o.registry_);
    data_ = o.data_;
    size_ = o.size_;
    id_ = o.id_;
    o.registry_.reset();
    o.id_ = 0;
  }
  return *this;
}

BufferRegistration::~BufferRegistration() { release(); }

bool BufferRegistration::registered() const {
  auto r = registry_.lock();
  if (!r) return false;
  auto it = r->by_begin.find(reinterpret_cast<uintptr_t>(data_));
  return it != r->by_begin.end() && it->second.id == id_;
}

void BufferRegistration::release() {
  if (auto r = registry_.lock()) r->remove(data_, id_);
  registry_.reset();
  id_ = 0;
}

Result<BufferRegistration> Communicator::register_buffer(void* data, size_t bytes) {
  auto id = impl_->registry->add(impl_->transports, data, bytes);
  if (!id) return id.status().with_context(fmt::format("rank {}: register_buffer", rank()));
  BufferRegistration r;
  r.registry_ = impl_->registry;
  r.data_ = data;
  r.size_ = bytes;
  r.id_ = *id;
  return r;
}

Status Communicator::deregister(BufferRegistration& registration) {
  auto owner = registration.registry_.lock();
  if (registration.id_ == 0) {
    return invalid_argument(
        fmt::format("rank {}: deregister: the registration is empty (moved from or already deregistered)", rank()));
  }
  if (owner != impl_->registry) {
    return invalid_argument(fmt::format("rank {}: deregister: the registration of {} is not one of this communicator's",
                                        rank(), registration.data_));
  }
  if (!owner->remove(registration.data_, registration.id_)) {
    return invalid_argument(fmt::format("rank {}: deregister: {} is not registered", rank(), registration.data_));
  }
  registration.registry_.reset();
  registration.id_ = 0;
  return ok_status();
}

// reduce_scatter's copy of its input: the communicator's own memory, so
// where registration pins it is registered once, for as long as it lives.
Status Communicator::Impl::ensure_work(size_t bytes) {
  if (bytes <= work.size()) return ok_status();
  if (work_id != 0) registry->remove(work.data(), work_id);
  work_id = 0;
  WEFT_ASSIGN_OR_RETURN(work, allocate(bytes, "reduce_scatter's copy of its input"));
  if (pins) {
    WEFT_ASSIGN_OR_RETURN(work_id, registry->add(transports, work.data(), work.size()));
  }
  return ok_status();
}

// A call's buffer, as the transports see it (Buffers::mem[kData]):
//  - transports that pin nothing: the caller's address, in a Memory kept
//    from the last call while the address and size stay the same (a
//    HostMemory holds nothing that an unmap could make stale);
//  - otherwise, inside a registration: that registration, at its offset
//    (zero-copy);
//  - an unregistered buffer of at most stage_max_bytes: copied into the
//    registered scratch behind the plan's part (finish_buffers copies it
//    back), which costs two copies and no system call;
//  - a larger one: registered for this call only and deregistered in
//    finish_buffers.
// A registration of an unregistered buffer is never kept across calls: its
// pages may be gone by the next one while the address stays the same.
Status Communicator::Impl::place_buffers(size_t scratch_bytes, void* data, size_t bytes) {
  internal::Registered& d = buffers.mem[internal::kData];
  buffers.ptr[internal::kData] = static_cast<char*>(data);
  d.base = 0;
  staged_to = nullptr;
  size_t scratch_needed = scratch_bytes;
  internal::Registry::Map::const_iterator reg = registry->end();
  if (pins) {
    reg = registry->find(data, bytes);
    if (reg == registry->end() && bytes <= cfg.stage_max_bytes) scratch_needed = stage_offset(scratch_bytes) + bytes;
  }
  // Not WEFT_RETURN_IF_ERROR: no copy of an OK Status per call.
  if (Status s = ensure_scratch(scratch_needed); !s) return s;
  auto& scratch_by = buffers.mem[internal::kScratch].by_transport;
  scratch_by.clear();
  for (auto& m : scratch_mem) scratch_by.push_back(m.get());
  buffers.ptr[internal::kScratch] = scratch.data();
  if (!pins) {
    if (data_mem.empty() || data_mem.front()->data() != data || data_mem.front()->size() != bytes) {
      data_mem.clear();
      d.by_transport.clear();
      for (auto& t : transports) {
        WEFT_ASSIGN_OR_RETURN(auto m, t->register_memory(data, bytes));
        d.by_transport.push_back(m.get());
        data_mem.push_back(std::move(m));
      }
    }
    return ok_status();
  }
  data_mem.clear();
  d.by_transport.clear();
  if (reg != registry->end()) {
    for (auto& m : reg->second.by_transport) d.by_transport.push_back(m.get());
    d.base = reinterpret_cast<uintptr_t>(data) - reg->first;
  } else if (bytes <= cfg.stage_max_bytes) {
    d.by_transport = scratch_by;
    d.base = stage_offset(scratch_bytes);
    buffers.ptr[internal::kData] = scratch.data() + d.base;
    std::memcpy(buffers.ptr[internal::kData], data, bytes);
    staged_to = static_cast<char*>(data);
  } else {
    for (auto& t : transports) {
      WEFT_ASSIGN_OR_RETURN(auto m, t->register_memory(data, bytes));
      d.by_transport.push_back(m.get());
      data_mem.push_back(std::move(m));
    }
  }
  return ok_status();
}

// After the call: a staged buffer goes back to the caller (only if the call
// succeeded: a failed call leaves the caller's buffer as it was), and a
// registration for this call only is dropped (a message still in flight
// keeps its own until it completes).
void Communicator::Impl::finish_buffers(const Status& s, size_t bytes) {
  if (staged_to != nullptr) {
    if (s) std::memcpy(staged_to, buffers.ptr[internal::kData], bytes);
    staged_to = nullptr;
  }
  if (pins) {
    data_mem.clear();
    buffers.mem[internal::kData].by_transport.clear();
  }
}

}  // namespace weft::coll
