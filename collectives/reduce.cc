// Reduce kernels: dst[i] = dst[i] op src[i].
//
// Each (type, op) is one flat loop over __restrict pointers that GCC
// vectorises, compiled three times: for AVX2 + F16C + FMA, for the x86-64
// baseline (SSE2), and with vectorisation off (the scalar twin that
// bench/reduce_bench.cc measures against and the tests use as reference).
// The AVX2 set is chosen once, by CPU features (__builtin_cpu_supports), not
// by target_clones("arch=haswell"), whose resolver matches CPU models and
// never picks it on AMD parts.
//
// Integer sum/prod wrap modulo 2^bits (computed in the unsigned type, so
// signed overflow is defined). Float min/max give NaN when either is NaN.
// f16/bf16 reduce in f32 and round back to nearest even.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "weft/collectives/types.h"

namespace weft::coll {
namespace {

template <typename T, bool = std::is_integral_v<T>>
struct WideOf { using type = T; };
template <typename T>
struct WideOf<T, true> { using type = std::make_unsigned_t<T>; };
template <typename T>
using Wide = typename WideOf<T>::type;

struct Sum {
  static constexpr bool kMinMax = false;
  template <typename T> static T apply(T a, T b) { return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b)); }
};
struct Prod {
  static constexpr bool kMinMax = false;
  template <typename T> static T apply(T a, T b) {
    if constexpr (std::is_same_v<T, uint8_t>) return static_cast<T>(static_cast<unsigned>(a) * b);
    else return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
  }
};
// Float min/max are IEEE 754-2019 minimum/maximum (as torch.minimum and
// torch.maximum): NaN when either operand is NaN, and -0 below +0. Both are
// symmetric to the bit, which the butterfly relies on: there each rank
// reduces its own vector with its partner's, in opposite order on the two
// sides, and `b < a ? b : a` kept whichever NaN or zero came first, so
// ranks could end the same call with different results.
// Written as selects on integers, not branches, so that GCC vectorises the
// loops: a float's bits with the magnitude flipped for negative values
// order as signed integers exactly as the floats do (IEEE 754-2019 5.10
// totalOrder), -0 below +0, so one integer compare picks the result. f16
// and bf16 are picked on their own 16 bits (the result is one of the
// operands: nothing to round).
template <typename I, bool kMin>
inline I total_order_pick(I x, I y) {
  constexpr int kShift = static_cast<int>(sizeof(I) * 8 - 1);
  constexpr I kMagnitude = std::numeric_limits<I>::max();
  const I kx = static_cast<I>(x ^ ((x >> kShift) & kMagnitude)), ky = static_cast<I>(y ^ ((y >> kShift) & kMagnitude));
  return (kMin ? ky < kx : kx < ky) ? y : x;
}
template <typename T, bool kMin>
inline T ieee_min_max(T a, T b) {
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  const I r = total_order_pick<I, kMin>(std::bit_cast<I>(a), std::bit_cast<I>(b));
  return a != a || b != b ? std::numeric_limits<T>::quiet_NaN() : std::bit_cast<T>(r);
}
// A 16-bit float's bits: NaN above `inf` (magnitude), the quiet NaN `qnan`.
template <bool kMin>
inline uint16_t half_min_max(uint16_t a, uint16_t b, int inf, uint16_t qnan) {
  const auto x = static_cast<int16_t>(a), y = static_cast<int16_t>(b);
  const auto r = static_cast<uint16_t>(total_order_pick<int16_t, kMin>(x, y));
  return (a & 0x7fff) > inf || (b & 0x7fff) > inf ? qnan : r;
}
struct Min {
  static constexpr bool kMinMax = true, kMin = true;
  template <typename T> static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return ieee_min_max<T, true>(a, b);
    else return b < a ? b : a;
  }
};
struct Max {
  static constexpr bool kMinMax = true, kMin = false;
  template <typename T> static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return ieee_min_max<T, false>(a, b);
    else return a < b ? b : a;
  }
};
template <typename Op>
concept MinMax = Op::kMinMax;

inline float bf16f(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }
inline uint16_t f_bf16(float f) {
  uint32_t b = std::bit_cast<uint32_t>(f);
  uint32_t r = b + 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(((b & 0x7fffffffu) > 0x7f800000u ? (b | 0x400000u) : r) >> 16);
}

template <typename Op, typename T>
inline void body(T* __restrict d, const T* __restrict s, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = Op::apply(d[i], s[i]);
}
template <typename Op>
inline void body_f16(_Float16* __restrict d, const _Float16* __restrict s, size_t n) {
  if constexpr (MinMax<Op>) {
    for (size_t i = 0; i < n; ++i) {
      d[i] = std::bit_cast<_Float16>(half_min_max<Op::kMin>(std::bit_cast<uint16_t>(d[i]), std::bit_cast<uint16_t>(s[i]),
                                                             0x7c00, 0x7e00));
    }
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = static_cast<_Float16>(Op::apply(static_cast<float>(d[i]), static_cast<float>(s[i])));
  }
}
template <typename Op>
inline void body_bf16(uint16_t* __restrict d, const uint16_t* __restrict s, size_t n) {
  if constexpr (MinMax<Op>) {
    for (size_t i = 0; i < n; ++i) d[i] = half_min_max<Op::kMin>(d[i], s[i], 0x7f80, 0x7fc0);
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = f_bf16(Op::apply(bf16f(d[i]), bf16f(s[i])));
  }
}

#if defined(__x86_64__)
#define WEFT_AVX2 __attribute__((target("avx2,f16c,fma")))
#else
#define WEFT_AVX2
#endif
#define WEFT_SCALAR __attribute__((optimize("no-tree-vectorize", "no-tree-loop-vectorize", "no-tree-slp-vectorize")))

// Three functions per (type, op); target attributes do not apply to
// template instances, so they are spelled out.
#define WEFT_KERNEL(NAME, BODY, T, OP)                                           \
  WEFT_AVX2 void NAME##_avx2(void* d, const void* s, size_t n) {                 \
    BODY<OP>(static_cast<T*>(d), static_cast<const T*>(s), n);                   \
  }                                                                              \
  void NAME(void* d, const void* s, size_t n) {                                  \
    BODY<OP>(static_cast<T*>(d), static_cast<const T*>(s), n);                   \
  }                                                                              \
  WEFT_SCALAR void NAME##_scalar(void* d, const void* s, size_t n) {             \
    BODY<OP>(static_cast<T*>(d), static_cast<const T*>(s), n);                   \
  }
#define WEFT_KERNELS(TN, BODY, T)            \
  WEFT_KERNEL(TN##_sum, BODY, T, Sum)        \
  WEFT_KERNEL(TN##_prod, BODY, T, Prod)      \
  WEFT_KERNEL(TN##_min, BODY, T, Min)        \
  WEFT_KERNEL(TN##_max, BODY, T, Max)

#define WEFT_PLAIN body
WEFT_KERNELS(f32, WEFT_PLAIN, float)
WEFT_KERNELS(f64, WEFT_PLAIN, double)
WEFT_KERNELS(i32, WEFT_PLAIN, int32_t)
WEFT_KERNELS(i64, WEFT_PLAIN, int64_t)
WEFT_KERNELS(u8, WEFT_PLAIN, uint8_t)
WEFT_KERNELS(f16, body_f16, _Float16)
WEFT_KERNELS(bf16, body_bf16, uint16_t)

using Kernel = void (*)(void*, const void*, size_t);
struct KernelSet {
  Kernel avx2;
  Kernel base;
  Kernel scalar;
};

#define WEFT_ROW(TN)                                                                            \
  {{TN##_sum_avx2, TN##_sum, TN##_sum_scalar}, {TN##_prod_avx2, TN##_prod, TN##_prod_scalar},     \
   {TN##_min_avx2, TN##_min, TN##_min_scalar}, {TN##_max_avx2, TN##_max, TN##_max_scalar}}
// Indexed [DataType][ReduceOp], in the enums' order.
const KernelSet kKernels[7][4] = {WEFT_ROW(f32), WEFT_ROW(f64), WEFT_ROW(f16), WEFT_ROW(bf16),
                                   WEFT_ROW(i32), WEFT_ROW(i64), WEFT_ROW(u8)};

bool cpu_has_avx2() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}
const bool kUseAvx2 = cpu_has_avx2();

}  // namespace

void reduce_into(void* dst, const void* src, size_t count, DataType t, ReduceOp op) {
  const KernelSet& k = kKernels[static_cast<int>(t)][static_cast<int>(op)];
  (kUseAvx2 ? k.avx2 : k.base)(dst, src, count);
}

void reduce_into_scalar(void* dst, const void* src, size_t count, DataType t, ReduceOp op) {
  kKernels[static_cast<int>(t)][static_cast<int>(op)].scalar(dst, src, count);
}

}  // namespace weft::coll
