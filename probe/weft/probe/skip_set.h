// The 5-tuples a resumed campaign must not probe again: for each destination,
// the source ports already recorded, kept as sorted, disjoint, non-adjacent
// ranges. A campaign that was killed part-way has recorded whole windows of
// consecutive ports (probe/campaign.cc sweeps them in order), so a
// destination costs a few ranges whatever the number of recorded ports:
// memory and the frames that carry it (agent/control.h, "skip") stay small
// at millions of recorded 5-tuples.
//
//   SkipSet s;
//   s.add(dst, 49152, 49215);      // ports 49152..49215 recorded
//   if (s.contains(dst, 49160)) ...
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

namespace weft::probe {

struct PortRange {
  uint16_t first = 0;
  uint16_t last = 0;  // inclusive
  bool operator==(const PortRange&) const = default;
};

class SkipSet {
 public:
  // Adds ports first..last (inclusive) of `dst`; overlapping and adjacent
  // ranges merge. first > last adds nothing.
  void add(uint32_t dst, uint16_t first, uint16_t last);
  void add(uint32_t dst, uint16_t port) { add(dst, port, port); }
  bool contains(uint32_t dst, uint16_t port) const;
  // How many of ports first..last (inclusive) of `dst` the set holds.
  uint64_t ports_within(uint32_t dst, uint16_t first, uint16_t last) const;

  bool empty() const { return by_dst_.empty(); }
  size_t ranges() const;  // over all destinations
  uint64_t ports() const;
  // Destinations in no particular order, each with its ranges in port order.
  void for_each(const std::function<void(uint32_t dst, const std::vector<PortRange>&)>& f) const;

  bool operator==(const SkipSet& o) const { return by_dst_ == o.by_dst_; }

 private:
  std::unordered_map<uint32_t, std::vector<PortRange>> by_dst_;
};

}  // namespace weft::probe
