// Items (flows of a plan or of a step) grouped by their source rank, so that
// a flow is found by scanning its source's few: in a step a rank sends one
// flow (HD, ring) or its channels x QPs (nccl-ring), in a plan a few dozen.
// A hash map of 10^6 flows costs a node each. Internal to routing/.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace weft::routing {

class SourceIndex {
 public:
  // Items 0 .. n - 1, item i from source src(i) in [0, sources); within a
  // source, in item order. Buffers are kept for the next build.
  template <class Src>
  void build(size_t sources, size_t n, Src&& src) {
    first_.assign(sources + 1, 0);
    for (size_t i = 0; i < n; ++i) ++first_[static_cast<size_t>(src(i)) + 1];
    for (size_t r = 0; r < sources; ++r) first_[r + 1] += first_[r];
    fill_.assign(first_.begin(), first_.end() - 1);
    items_.resize(n);
    for (size_t i = 0; i < n; ++i) items_[fill_[static_cast<size_t>(src(i))]++] = static_cast<uint32_t>(i);
  }
  // The items of source r; none for r outside [0, sources).
  std::span<const uint32_t> of(int r) const {
    if (r < 0 || static_cast<size_t>(r) + 1 >= first_.size()) return {};
    return {items_.data() + first_[static_cast<size_t>(r)], first_[static_cast<size_t>(r) + 1] - first_[static_cast<size_t>(r)]};
  }

 private:
  std::vector<uint32_t> first_;  // source r's items: items_[first_[r], first_[r + 1])
  std::vector<uint32_t> fill_;
  std::vector<uint32_t> items_;
};

}  // namespace weft::routing
