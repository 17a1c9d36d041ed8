// How a send is split over a connection's QPs (weft/nccl_net/qp_share.h):
// every share but the last a multiple of 128 bytes (NCCL's LL and LL128
// read lines as they land), the shares end to end over the whole send.
#include <gtest/gtest.h>

#include <vector>

#include "weft/nccl_net/qp_share.h"

namespace weft::nccl_net {
namespace {

struct ShareCase {
  std::uint64_t size;
  std::uint64_t nq;
  std::vector<QpShare> want;
};

void PrintTo(const ShareCase& c, std::ostream* os) { *os << c.size << " bytes over " << c.nq << " QPs"; }

class QpShares : public ::testing::TestWithParam<ShareCase> {};

TEST_P(QpShares, AreExactly) {
  const ShareCase& c = GetParam();
  for (std::uint64_t q = 0; q < c.nq; ++q) {
    const QpShare s = qp_share(c.size, c.nq, q);
    EXPECT_EQ(s.offset, c.want[q].offset) << "QP " << q;
    EXPECT_EQ(s.bytes, c.want[q].bytes) << "QP " << q;
  }
}

// One LL line (16 bytes) over 4 QPs stays on QP 0 (an even split wrote its
// data and flags from different QPs); an LL128 message of 3 lines over 2
// QPs splits between lines, not in the middle of the second.
INSTANTIATE_TEST_SUITE_P(
    Sizes, QpShares,
    ::testing::Values(ShareCase{0, 3, {{0, 0}, {0, 0}, {0, 0}}}, ShareCase{1, 1, {{0, 1}}},
                      ShareCase{16, 4, {{0, 16}, {16, 0}, {16, 0}, {16, 0}}},
                      ShareCase{384, 2, {{0, 256}, {256, 128}}},
                      ShareCase{4099, 4, {{0, 1152}, {1152, 1152}, {2304, 1152}, {3456, 643}}},
                      ShareCase{1048579, 3, {{0, 349568}, {349568, 349568}, {699136, 349443}}},
                      ShareCase{256, 16, {{0, 128}, {128, 128}, {256, 0}, {256, 0}, {256, 0}, {256, 0}, {256, 0},
                                          {256, 0}, {256, 0}, {256, 0}, {256, 0}, {256, 0}, {256, 0}, {256, 0},
                                          {256, 0}, {256, 0}}}));

TEST(QpShare, SharesTileTheSendAndAllButTheLastAreWholeLines) {
  for (std::uint64_t nq = 1; nq <= 16; ++nq) {
    for (std::uint64_t size = 0; size <= 5000; size += size < 300 ? 1 : 37) {
      std::uint64_t next = 0;
      for (std::uint64_t q = 0; q < nq; ++q) {
        const QpShare s = qp_share(size, nq, q);
        ASSERT_EQ(s.offset, next) << size << " bytes, QP " << q << " of " << nq;
        if (s.offset + s.bytes < size) {
          ASSERT_EQ(s.bytes % 128, 0u) << size << " bytes, QP " << q << " of " << nq;
        }
        next = s.offset + s.bytes;
      }
      ASSERT_EQ(next, size) << size << " bytes over " << nq << " QPs";
    }
  }
}

}  // namespace
}  // namespace weft::nccl_net
