// Union-find with path halving (internal to the inference, inference.cc and
// planes.cc): the parts of a graph given edge by edge.
#pragma once

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

namespace weft::probe {

struct UnionFind {
  std::vector<size_t> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), size_t{0}); }
  size_t find(size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  // The smaller root wins: a part is named by its smallest member.
  void join(size_t a, size_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

}  // namespace weft::probe
