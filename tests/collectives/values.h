// Inputs and references for the correctness matrix.
//
// Inputs are chosen so that integer results are exact (wrapping for u8 is
// defined) and so that f16/bf16 sums, products and min/max are exact too
// (quarters, small magnitudes, powers of two). f32/f64 sums use tenths, which
// are inexact: they are checked against the reference — the scalar kernel
// folding ranks 0, 1, ..., P-1 in order — within the documented tolerance
//   |got - ref| <= (P - 1) * eps(type) * sum_r |x_r|  (+ the smallest normal)
// the standard bound on reordering a sum of P terms (Higham, "Accuracy and
// Stability of Numerical Algorithms", 2nd ed., section 4.2).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "weft/collectives/types.h"

namespace weft::coll::testing {

inline double input_value(DataType t, ReduceOp op, int rank, size_t i) {
  const long r = rank;
  const long k = static_cast<long>(i);  // i < kPeriod
  switch (op) {
    case ReduceOp::kSum:
      if (t == DataType::kF32 || t == DataType::kF64) return static_cast<double>((r * 131 + k * 31) % 23 - 11) * 0.1;
      if (t == DataType::kF16 || t == DataType::kBF16) return static_cast<double>((r * 3 + k) % 9 - 4) * 0.25;
      if (t == DataType::kU8) return static_cast<double>((r * 7 + k * 3) % 251);
      return static_cast<double>((r * 7 + k * 3) % 11 - 5);
    case ReduceOp::kProd: return (r + k) % 4 == 0 ? 2.0 : 1.0;
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      if (t == DataType::kU8) return static_cast<double>((r * 37 + k * 11) % 29);
      return static_cast<double>((r * 37 + k * 11) % 29 - 14);
  }
  return 0;
}

// Stores v as element i of a `t` array.
inline void store_value(DataType t, void* base, size_t i, double v) {
  switch (t) {
    case DataType::kF32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DataType::kF64: static_cast<double*>(base)[i] = v; break;
    case DataType::kF16: static_cast<uint16_t*>(base)[i] = f32_to_f16(static_cast<float>(v)); break;
    case DataType::kBF16: static_cast<uint16_t*>(base)[i] = f32_to_bf16(static_cast<float>(v)); break;
    case DataType::kI32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DataType::kI64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case DataType::kU8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(static_cast<long>(v)); break;
  }
}

inline double load_value(DataType t, const void* base, size_t i) {
  switch (t) {
    case DataType::kF32: return static_cast<const float*>(base)[i];
    case DataType::kF64: return static_cast<const double*>(base)[i];
    case DataType::kF16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DataType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DataType::kI32: return static_cast<const int32_t*>(base)[i];
    case DataType::kI64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DataType::kU8: return static_cast<const uint8_t*>(base)[i];
  }
  return 0;
}

inline bool is_float(DataType t) {
  return t == DataType::kF32 || t == DataType::kF64 || t == DataType::kF16 || t == DataType::kBF16;
}

inline double epsilon(DataType t) {
  switch (t) {
    case DataType::kF32: return 0x1p-23;
    case DataType::kF64: return 0x1p-52;
    case DataType::kF16: return 0x1p-10;
    case DataType::kBF16: return 0x1p-7;
    default: return 0;
  }
}

// Inputs repeat with period kPeriod (a prime, so no block boundary of the
// algorithms lines up with it), and so do the references: one period is
// generated (and cached), the rest tiled. This keeps the matrix fast under
// the sanitizers without changing a single checked value.
inline constexpr size_t kPeriod = 100003;

// One period of `rank`'s input, built once per process.
inline const std::vector<char>& input_period(DataType t, ReduceOp op, int rank) {
  static std::mutex mu;
  static std::map<std::tuple<DataType, ReduceOp, int>, std::vector<char>> cache;
  std::lock_guard<std::mutex> l(mu);
  auto key = std::make_tuple(t, op, rank);
  auto it = cache.find(key);
  if (it == cache.end()) {
    std::vector<char> v(kPeriod * dtype_size(t));
    for (size_t i = 0; i < kPeriod; ++i) store_value(t, v.data(), i, input_value(t, op, rank, i));
    it = cache.emplace(key, std::move(v)).first;
  }
  return it->second;
}

// Elements [first, first + count) of `rank`'s input into dst.
inline void fill_input(DataType t, ReduceOp op, int rank, size_t count, void* dst, size_t first = 0) {
  const size_t es = dtype_size(t);
  const char* period = input_period(t, op, rank).data();
  for (size_t i = 0; i < count;) {
    const size_t at = (first + i) % kPeriod, n = std::min(kPeriod - at, count - i);
    std::memcpy(static_cast<char*>(dst) + i * es, period + at * es, n * es);
    i += n;
  }
}

// count elements (plus one spare byte, so that data() is never null).
inline std::vector<char> make_input(DataType t, ReduceOp op, int rank, size_t count) {
  std::vector<char> v(count * dtype_size(t) + 1);
  fill_input(t, op, rank, count, v.data());
  return v;
}

// True when got holds elements [first, first + count) of `rank`'s input.
inline bool equals_input(DataType t, ReduceOp op, int rank, const void* got, size_t count, size_t first = 0) {
  const size_t es = dtype_size(t);
  const char* period = input_period(t, op, rank).data();
  for (size_t i = 0; i < count;) {
    const size_t at = (first + i) % kPeriod, n = std::min(kPeriod - at, count - i);
    if (std::memcmp(static_cast<const char*>(got) + i * es, period + at * es, n * es) != 0) return false;
    i += n;
  }
  return true;
}

// The reference over one period: the fold in rank order, and per element
// the tolerance (floats only).
struct Reference {
  std::vector<char> value;
  std::vector<double> tol;  // empty for integer types
  double expected(DataType t, size_t i) const { return load_value(t, value.data(), i % kPeriod); }
};

inline Reference make_reference(DataType t, ReduceOp op, int ranks) {
  Reference ref;
  ref.value = input_period(t, op, 0);
  std::vector<double> absum;
  if (is_float(t)) {
    absum.resize(kPeriod);
    for (size_t i = 0; i < kPeriod; ++i) absum[i] = std::fabs(load_value(t, ref.value.data(), i));
  }
  for (int r = 1; r < ranks; ++r) {
    const auto& x = input_period(t, op, r);
    reduce_into_scalar(ref.value.data(), x.data(), kPeriod, t, op);
    for (size_t i = 0; i < absum.size(); ++i) absum[i] += std::fabs(load_value(t, x.data(), i));
  }
  for (double a : absum) ref.tol.push_back((ranks - 1) * epsilon(t) * a + 1e-300);
  return ref;
}

// Index (from 0) of the first element of got — elements [first, first +
// count) of the reduced vector — that misses the reference, or -1.
inline long first_mismatch(DataType t, const Reference& ref, const void* got, size_t count, size_t first = 0) {
  const size_t es = dtype_size(t);
  for (size_t i = 0; i < count;) {
    const size_t at = (first + i) % kPeriod, n = std::min(kPeriod - at, count - i);
    const char* g = static_cast<const char*>(got) + i * es;
    // Bit-identical runs first: every integer result, and the float results
    // that are exact in any order (f16/bf16 sums, products, min, max), pass
    // here at memcmp speed; the per-element walk (a conversion per element:
    // softfloat for f16 in the emulated RDMA VM) is left for what differs.
    if (std::memcmp(ref.value.data() + at * es, g, n * es) == 0) {
      i += n;
      continue;
    }
    if (!is_float(t)) {
      for (size_t j = 0; j < n; ++j) {
        if (std::memcmp(ref.value.data() + (at + j) * es, g + j * es, es) != 0) return static_cast<long>(i + j);
      }
    } else {
      for (size_t j = 0; j < n; ++j) {
        const double a = load_value(t, g, j), b = load_value(t, ref.value.data(), at + j);
        if (!(std::fabs(a - b) <= ref.tol[at + j])) return static_cast<long>(i + j);
      }
    }
    i += n;
  }
  return -1;
}

// Shared, built once per process by whichever rank thread asks first (a
// process test builds them before forking its ranks).
inline const Reference& cached_reference(DataType t, ReduceOp op, int ranks) {
  static std::mutex mu;
  static std::map<std::tuple<DataType, ReduceOp, int>, Reference> cache;
  std::lock_guard<std::mutex> l(mu);
  auto key = std::make_tuple(t, op, ranks);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make_reference(t, op, ranks)).first;
  return it->second;
}

}  // namespace weft::coll::testing
