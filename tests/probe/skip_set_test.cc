// SkipSet: ranges merge when they overlap or touch, stay apart otherwise, and
// membership is exact at every boundary.
#include <gtest/gtest.h>

#include <set>

#include "weft/probe/skip_set.h"

namespace weft::probe {
namespace {

struct Adds {
  std::vector<PortRange> add;   // in this order, all to one destination
  std::vector<PortRange> want;  // the ranges it holds
};
std::ostream& operator<<(std::ostream& o, const Adds& a) { return o << a.add.size() << " adds"; }

class SkipSetMerge : public ::testing::TestWithParam<Adds> {};

TEST_P(SkipSetMerge, HoldsExactlyThePortsAddedAsFewestRanges) {
  SkipSet s;
  std::set<uint32_t> ports;
  for (const auto& r : GetParam().add) {
    s.add(9, r.first, r.last);
    for (uint32_t p = r.first; p <= r.last; ++p) ports.insert(p);
  }
  std::vector<PortRange> got;
  s.for_each([&](uint32_t dst, const std::vector<PortRange>& v) {
    EXPECT_EQ(dst, 9u);
    got = v;
  });
  EXPECT_EQ(got, GetParam().want);
  EXPECT_EQ(s.ports(), ports.size());
  for (uint32_t p = 0; p <= 65535; ++p) {
    ASSERT_EQ(s.contains(9, static_cast<uint16_t>(p)), ports.count(p) == 1) << p;
  }
  EXPECT_FALSE(s.contains(10, GetParam().add.front().first));
  for (const auto& [lo, hi] : {std::pair<uint32_t, uint32_t>{0, 65535}, {5, 9}, {6, 11}, {100, 100}, {150, 305}}) {
    uint64_t want = 0;
    for (uint32_t p : ports) want += p >= lo && p <= hi;
    EXPECT_EQ(s.ports_within(9, static_cast<uint16_t>(lo), static_cast<uint16_t>(hi)), want) << lo << ".." << hi;
  }
  EXPECT_EQ(s.ports_within(10, 0, 65535), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SkipSetMerge,
    ::testing::Values(Adds{{{5, 5}}, {{5, 5}}}, Adds{{{5, 9}, {11, 12}}, {{5, 9}, {11, 12}}},
                      Adds{{{5, 9}, {10, 12}}, {{5, 12}}},                    // touching after
                      Adds{{{10, 12}, {5, 9}}, {{5, 12}}},                    // touching before
                      Adds{{{1, 2}, {7, 8}, {20, 30}, {3, 19}}, {{1, 30}}},   // bridges three
                      Adds{{{1, 2}, {7, 8}, {20, 30}, {4, 5}}, {{1, 2}, {4, 5}, {7, 8}, {20, 30}}},
                      Adds{{{100, 200}, {150, 160}}, {{100, 200}}},           // inside
                      Adds{{{0, 0}, {65535, 65535}, {1, 65534}}, {{0, 65535}}},  // the edges
                      Adds{{{300, 310}, {9, 8}}, {{300, 310}}}));             // first > last adds nothing

TEST(SkipSet, EqualSetsCompareEqualWhateverTheOrderOfAdds) {
  SkipSet a, b;
  a.add(1, 10, 20);
  a.add(2, 5);
  a.add(1, 21, 30);
  b.add(2, 5);
  b.add(1, 10, 30);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.ranges(), 2u);
  EXPECT_EQ(a.ports(), 22u);
}

}  // namespace
}  // namespace weft::probe
