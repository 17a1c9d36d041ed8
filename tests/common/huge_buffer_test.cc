// HugeBuffer: zero-filled, movable, and recycled memory comes back zeroed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "weft/common/huge_buffer.h"

namespace weft {
namespace {

bool all_zero(const HugeBuffer& b) {
  return std::all_of(b.data(), b.data() + b.size(), [](char c) { return c == 0; });
}

class HugeBufferTest : public ::testing::TestWithParam<size_t> {
 protected:
  void TearDown() override { HugeBuffer::set_recycling(0); }
};

TEST_P(HugeBufferTest, IsZeroFilledAndWritable) {
  HugeBuffer b(GetParam());
  ASSERT_EQ(b.size(), GetParam());
  EXPECT_TRUE(all_zero(b));
  std::memset(b.data(), 0x5a, b.size());
  EXPECT_EQ(b.data()[b.size() - 1], 0x5a);
}

TEST_P(HugeBufferTest, RecycledMemoryIsReusedAndZeroedAgain) {
  HugeBuffer::set_recycling(size_t{64} << 20);
  const char* first = nullptr;
  {
    HugeBuffer b(GetParam());
    first = b.data();
    std::memset(b.data(), 0x7f, b.size());
  }
  HugeBuffer again(GetParam() - 3);  // best fit: a smaller request takes it too
  EXPECT_EQ(again.data(), first) << "the freed buffer is handed out again";
  EXPECT_EQ(again.size(), GetParam() - 3);
  EXPECT_TRUE(all_zero(again));
}

TEST_P(HugeBufferTest, WithoutRecyclingNothingIsKept) {
  HugeBuffer::set_recycling(0);
  { HugeBuffer b(GetParam()); }
  HugeBuffer c(GetParam());
  EXPECT_TRUE(all_zero(c));
}

// Sizes below, at and above the 2 MiB huge page, awkward on purpose.
INSTANTIATE_TEST_SUITE_P(Sizes, HugeBufferTest,
                         ::testing::Values(size_t{13}, size_t{4099}, (size_t{2} << 20) + 7, size_t{5} << 20));

TEST(HugeBufferMoveTest, MovesOwnershipAndEmptiesTheSource) {
  HugeBuffer a(1000);
  char* p = a.data();
  HugeBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.size(), 1000u);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  HugeBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(HugeBuffer(0).empty());
}

}  // namespace
}  // namespace weft
