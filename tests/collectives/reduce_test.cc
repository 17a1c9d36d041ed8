#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "values.h"
#include "weft/collectives/types.h"

namespace weft::coll::testing {
namespace {

TEST(HalfConversion, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);        // tie -> even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);    // tie -> even (up)
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::nanf("")))));
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
}

TEST(Bfloat16Conversion, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);       // tie -> even
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);   // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
}

TEST(ReduceKernel, IntegerSumAndProductWrapLikeUnsignedArithmetic) {
  int32_t a[3] = {std::numeric_limits<int32_t>::max(), -5, 7};
  int32_t b[3] = {1, 3, -7};
  reduce_into(a, b, 3, DataType::kI32, ReduceOp::kSum);
  EXPECT_EQ(a[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(a[1], -2);
  EXPECT_EQ(a[2], 0);
  uint8_t u[2] = {200, 16}, v[2] = {100, 17};
  reduce_into(u, v, 2, DataType::kU8, ReduceOp::kSum);
  EXPECT_EQ(u[0], 44);
  reduce_into(u, v, 2, DataType::kU8, ReduceOp::kProd);
  EXPECT_EQ(u[0], (44 * 100) % 256);
  EXPECT_EQ(u[1], (33 * 17) % 256);
  int64_t m[2] = {-3, 9}, n[2] = {4, -12};
  reduce_into(m, n, 2, DataType::kI64, ReduceOp::kMin);
  EXPECT_EQ(m[0], -3);
  EXPECT_EQ(m[1], -12);
}

TEST(ReduceKernel, HalfSumRoundsOncePerStep) {
  uint16_t a[1] = {f32_to_f16(2048.0f)}, b[1] = {f32_to_f16(1.0f)};
  reduce_into(a, b, 1, DataType::kF16, ReduceOp::kSum);
  EXPECT_EQ(f16_to_f32(a[0]), 2048.0f);  // 2049 is a tie between 2048 and 2050: even wins
  uint16_t c[1] = {f32_to_bf16(256.0f)}, d[1] = {f32_to_bf16(3.0f)};
  reduce_into(c, d, 1, DataType::kBF16, ReduceOp::kSum);
  EXPECT_EQ(bf16_to_f32(c[0]), 260.0f);  // 259 -> 260 (8 significant bits)
}

// IEEE 754-2019 minimum/maximum, to the bit and with the operands either
// way round: both kernels (vectorised and scalar) over every pair of special
// values, each pair at a position of its own so the vector body and the tail
// both see them.
class MinMaxSpecials : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {};

TEST_P(MinMaxSpecials, NaNWinsMinusZeroIsBelowPlusZeroAndSwappingTheOperandsChangesNoBit) {
  const auto [t, op] = GetParam();
  const double inf = std::numeric_limits<double>::infinity();
  const double specials[] = {std::nan(""), -std::nan(""), 0.0, -0.0, inf, -inf, 1.0, -1.0, 0x1p-130, 65504.0};
  std::vector<double> xs, ys;
  for (double x : specials) {
    for (double y : specials) xs.push_back(x), ys.push_back(y);
  }
  const size_t n = xs.size(), es = dtype_size(t);
  std::vector<char> a(n * es), b(n * es);
  for (size_t i = 0; i < n; ++i) {
    store_value(t, a.data(), i, xs[i]);
    store_value(t, b.data(), i, ys[i]);
  }
  for (auto kernel : {&reduce_into, &reduce_into_scalar}) {
    std::vector<char> ab = a, ba = b;
    kernel(ab.data(), b.data(), n, t, op);
    kernel(ba.data(), a.data(), n, t, op);
    for (size_t i = 0; i < n; ++i) {
      const double x = load_value(t, a.data(), i), y = load_value(t, b.data(), i);  // as the type holds them
      const double got = load_value(t, ab.data(), i);
      const std::string what =
          fmt::format("{}({}, {}){}", reduce_op_name(op), x, y, kernel == &reduce_into ? "" : " scalar");
      ASSERT_EQ(0, std::memcmp(ab.data() + i * es, ba.data() + i * es, es)) << what << ": operand order matters";
      if (std::isnan(x) || std::isnan(y)) {
        EXPECT_TRUE(std::isnan(got)) << what << " = " << got;
      } else if (x == 0 && y == 0) {
        EXPECT_EQ(std::signbit(got), op == ReduceOp::kMin ? std::signbit(x) || std::signbit(y)
                                                          : std::signbit(x) && std::signbit(y))
            << what;
      } else {
        EXPECT_EQ(got, op == ReduceOp::kMin ? std::min(x, y) : std::max(x, y)) << what;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, MinMaxSpecials,
                         ::testing::Combine(::testing::Values(DataType::kF32, DataType::kF64, DataType::kF16,
                                                              DataType::kBF16),
                                            ::testing::Values(ReduceOp::kMin, ReduceOp::kMax)),
                         [](const auto& p) {
                           return std::string(dtype_name(std::get<0>(p.param))) + "_" +
                                  std::string(reduce_op_name(std::get<1>(p.param)));
                         });

class KernelVsScalar : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {};

TEST_P(KernelVsScalar, VectorisedKernelGivesTheScalarLoopsBits) {
  const auto [t, op] = GetParam();
  std::mt19937_64 rng(42);
  for (size_t n : {0, 1, 3, 5, 7, 13, 31, 33, 64, 1023, 4099}) {
    const size_t es = dtype_size(t);
    std::vector<char> a(n * es + 1), b(n * es + 1);
    for (size_t i = 0; i < n; ++i) {
      double x = static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000) / 7.0;
      double y = static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000) / 7.0;
      if (op == ReduceOp::kProd) {
        x = x / 100.0;
        y = y / 100.0;
      }
      store_value(t, a.data(), i, x);
      store_value(t, b.data(), i, y);
    }
    std::vector<char> fast = a, slow = a;
    reduce_into(fast.data(), b.data(), n, t, op);
    reduce_into_scalar(slow.data(), b.data(), n, t, op);
    ASSERT_EQ(0, std::memcmp(fast.data(), slow.data(), n * es)) << dtype_name(t) << " " << reduce_op_name(op) << " n=" << n;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, KernelVsScalar,
                         ::testing::Combine(::testing::ValuesIn(kAllDataTypes), ::testing::ValuesIn(kAllReduceOps)),
                         [](const auto& p) {
                           return std::string(dtype_name(std::get<0>(p.param))) + "_" +
                                  std::string(reduce_op_name(std::get<1>(p.param)));
                         });

}  // namespace
}  // namespace weft::coll::testing
