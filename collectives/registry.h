// Registered memory of a communicator (internal): the application's buffers
// (Communicator::register_buffer) and the communicator's own long-lived
// buffers, each registered once with every transport, by start address.
//
// Found by address, but only because every entry's owner promised its
// pages: the application until it deregisters, the communicator for the
// memory it holds. A caller's unregistered buffer is never entered here
// (Communicator::Impl::place_buffers copies or registers it per call).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "weft/collectives/transport.h"
#include "weft/common/status.h"

namespace weft::coll::internal {

struct Registry {
  struct Entry {
    size_t bytes = 0;
    uint64_t id = 0;
    std::vector<std::unique_ptr<Memory>> by_transport;  // index = transport index
  };
  using Map = std::map<uintptr_t, Entry>;

  // Registers [data, data + bytes) with every transport; an empty, wrapping
  // or overlapping range is an error naming it. Returns the entry's id.
  Result<uint64_t> add(const std::vector<std::unique_ptr<Transport>>& transports, void* data, size_t bytes);
  // Drops the entry at `data` with `id`; false if there is none.
  bool remove(const void* data, uint64_t id);
  // The entry whose range holds [data, data + bytes), or end().
  Map::const_iterator find(const void* data, size_t bytes) const;
  Map::const_iterator end() const { return by_begin.end(); }

  Map by_begin;
  uint64_t last_id = 0;
};

}  // namespace weft::coll::internal
