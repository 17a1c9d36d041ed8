// Checks an integer AllReduce sum element by element against the sum over
// ranks of value(rank, i), wrapping as the reduce kernels do (reduce.cc:
// integer sums are computed in the unsigned type).
#pragma once

#include <cstddef>
#include <type_traits>

namespace weft::coll::testing {

struct SumCheck {
  size_t wrong = 0;  // elements that differ
  size_t first = 0;  // the first of them (count if none)
};

template <typename T, typename Value>
SumCheck check_sum(const T* v, size_t count, int ranks, Value value) {
  using U = std::make_unsigned_t<T>;
  SumCheck c{0, count};
  for (size_t i = 0; i < count; ++i) {
    U want = 0;
    for (int r = 0; r < ranks; ++r) want = static_cast<U>(want + static_cast<U>(value(r, i)));
    if (v[i] != static_cast<T>(want) && c.wrong++ == 0) c.first = i;
  }
  return c;
}

}  // namespace weft::coll::testing
