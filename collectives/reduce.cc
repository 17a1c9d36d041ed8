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
// signed overflow is defined). Float min/max keep dst when either is NaN.
// f16/bf16 reduce in f32 and round back to nearest even.
#include <bit>
#include <cstdint>
#include <cstring>
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
  template <typename T> static T apply(T a, T b) { return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b)); }
};
struct Prod {
  template <typename T> static T apply(T a, T b) {
    if constexpr (std::is_same_v<T, uint8_t>) return static_cast<T>(static_cast<unsigned>(a) * b);
    else return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
  }
};
struct Min {
  template <typename T> static T apply(T a, T b) { return b < a ? b : a; }
};
struct Max {
  template <typename T> static T apply(T a, T b) { return a < b ? b : a; }
};

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
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<_Float16>(Op::apply(static_cast<float>(d[i]), static_cast<float>(s[i])));
}
template <typename Op>
inline void body_bf16(uint16_t* __restrict d, const uint16_t* __restrict s, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = f_bf16(Op::apply(bf16f(d[i]), bf16f(s[i])));
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
