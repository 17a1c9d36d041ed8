// Every rank's value, in rank order, through the rendezvous store in O(P)
// requests (internal).
//
// Each rank publishes its value; rank 0 reads them all and publishes them
// as one list, which every other rank reads with one or a few requests. A
// rank reading every other rank's key would make P² requests of the one
// store server (rank 0's): 1M at 1024 ranks. The list is cut into chunks
// well under the store's value bound (TcpStoreLimits::max_value_bytes).
//
//   auto hosts = store_allgather(store, "weft/host", rank, size, my_host, deadline);
//   // rank 0 waiting for a rank that never comes names its key ("weft/host/3");
//   // the others name "weft/host/all" and that rank 0 gathers it.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "weft/collectives/store.h"
#include "weft/common/status.h"

namespace weft::coll::internal {

// Bytes of each published chunk of the list.
inline constexpr size_t kStoreChunkBytes = 256 << 10;

Result<std::vector<std::string>> store_allgather(Store& store, const std::string& prefix, int rank, int size,
                                                 const std::string& mine,
                                                 std::chrono::steady_clock::time_point deadline);

// The list's encoding: each value as its decimal length, ':', its bytes.
std::string encode_values(const std::vector<std::string>& values);
// Exactly `count` values, or an error saying what is wrong with `bytes`.
Result<std::vector<std::string>> decode_values(std::string_view bytes, size_t count);

}  // namespace weft::coll::internal
