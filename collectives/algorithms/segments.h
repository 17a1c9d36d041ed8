// Splitting a block into pipelining segments (internal). Sender and receiver
// compute the same split from the block alone, so their messages match one
// for one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace weft::coll::internal {

struct Segment {
  size_t lo;  // elements
  size_t n;
};

// [lo, lo+n) in pieces of at most `seg_bytes` (rounded down to whole
// elements, at least one); an empty block has no segments.
inline std::vector<Segment> split(size_t lo, size_t n, size_t esize, size_t seg_bytes) {
  std::vector<Segment> out;
  const size_t per = std::max<size_t>(1, seg_bytes / esize);
  for (size_t i = 0; i < n; i += per) out.push_back({lo + i, std::min(per, n - i)});
  return out;
}

}  // namespace weft::coll::internal
