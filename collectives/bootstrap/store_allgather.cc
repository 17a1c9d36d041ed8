#include "bootstrap/store_allgather.h"

#include <charconv>

#include <fmt/format.h>

namespace weft::coll::internal {

std::string encode_values(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) {
    out += std::to_string(v.size());
    out += ':';
    out += v;
  }
  return out;
}

Result<std::vector<std::string>> decode_values(std::string_view bytes, size_t count) {
  std::vector<std::string> values;
  values.reserve(count);
  while (!bytes.empty()) {
    size_t len = 0;
    const auto [end, ec] = std::from_chars(bytes.data(), bytes.data() + bytes.size(), len);
    const size_t digits = static_cast<size_t>(end - bytes.data());
    if (ec != std::errc() || digits == 0 || digits >= bytes.size() || *end != ':' ||
        len > bytes.size() - digits - 1) {
      return internal_error(fmt::format("store: the gathered list is malformed at value {}", values.size()));
    }
    values.emplace_back(bytes.substr(digits + 1, len));
    bytes.remove_prefix(digits + 1 + len);
  }
  if (values.size() != count) {
    return internal_error(fmt::format("store: the gathered list has {} values, not {}", values.size(), count));
  }
  return values;
}

Result<std::vector<std::string>> store_allgather(Store& store, const std::string& prefix, int rank, int size,
                                                 const std::string& mine,
                                                 std::chrono::steady_clock::time_point deadline) {
  const std::string all = prefix + "/all";
  if (rank == 0) {
    std::vector<std::string> values(static_cast<size_t>(size));
    values[0] = mine;
    for (int r = 1; r < size; ++r) {
      auto v = store.get(fmt::format("{}/{}", prefix, r), deadline);
      if (!v) {
        return v.status().with_context(fmt::format(
            "rank {} of {} did not join (is it running, with the same store and world size, and a rank of its own?)", r,
            size));
      }
      values[static_cast<size_t>(r)] = std::move(*v);
    }
    const std::string list = encode_values(values);
    size_t chunks = 0;
    for (size_t at = 0; at < list.size(); at += kStoreChunkBytes, ++chunks) {
      WEFT_RETURN_IF_ERROR(
          store.set_by(fmt::format("{}/{}", all, chunks), list.substr(at, kStoreChunkBytes), deadline));
    }
    // The count last: a reader that sees it finds every chunk.
    WEFT_RETURN_IF_ERROR(store.set_by(all, std::to_string(chunks), deadline));
    return values;
  }
  WEFT_RETURN_IF_ERROR(store.set_by(fmt::format("{}/{}", prefix, rank), mine, deadline));
  const auto gathered = [&]() -> Result<std::string> {
    WEFT_ASSIGN_OR_RETURN(const std::string count, store.get(all, deadline));
    size_t chunks = 0;
    const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), chunks);
    if (ec != std::errc() || end != count.data() + count.size()) {
      return internal_error(fmt::format("store: '{}' holds '{}', not a chunk count", all, count));
    }
    std::string list;
    for (size_t i = 0; i < chunks; ++i) {
      WEFT_ASSIGN_OR_RETURN(const std::string part, store.get(fmt::format("{}/{}", all, i), deadline));
      list += part;
    }
    return list;
  }();
  if (!gathered) {
    return gathered.status().with_context(
        fmt::format("rank {} waited for rank 0 to gather every rank's '{}/<rank>' (rank 0's error names a rank "
                    "that did not come)", rank, prefix));
  }
  return decode_values(*gathered, static_cast<size_t>(size));
}

}  // namespace weft::coll::internal
