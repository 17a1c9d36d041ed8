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
// algorithms lines up with it): generating one period and tiling keeps the
// matrix fast under the sanitizers.
inline constexpr size_t kPeriod = 100003;

inline std::vector<char> make_input(DataType t, ReduceOp op, int rank, size_t count) {
  const size_t es = dtype_size(t);
  std::vector<char> v(count * es + 1);
  const size_t first = std::min(count, kPeriod);
  for (size_t i = 0; i < first; ++i) store_value(t, v.data(), i, input_value(t, op, rank, i));
  for (size_t i = first; i < count; i += kPeriod) {
    std::memcpy(v.data() + i * es, v.data(), std::min(kPeriod, count - i) * es);
  }
  return v;
}

struct Reference {
  std::vector<char> value;   // the fold in rank order
  std::vector<double> tol;   // per element; empty for integer types
};

inline Reference make_reference(DataType t, ReduceOp op, int ranks, size_t count) {
  Reference ref;
  ref.value = make_input(t, op, 0, count);
  std::vector<double> absum;
  if (is_float(t)) {
    absum.resize(count);
    for (size_t i = 0; i < count; ++i) absum[i] = std::fabs(load_value(t, ref.value.data(), i));
  }
  for (int r = 1; r < ranks; ++r) {
    auto x = make_input(t, op, r, count);
    reduce_into_scalar(ref.value.data(), x.data(), count, t, op);
    for (size_t i = 0; i < absum.size(); ++i) absum[i] += std::fabs(load_value(t, x.data(), i));
  }
  for (double a : absum) ref.tol.push_back((ranks - 1) * epsilon(t) * a + 1e-300);
  return ref;
}

// Index of the first element of got that misses the reference, or -1.
inline long first_mismatch(DataType t, const Reference& ref, const void* got, size_t count) {
  if (count == 0) return -1;  // an empty vector's data() may be null: no memcmp
  if (!is_float(t)) {
    const size_t es = dtype_size(t);
    if (std::memcmp(ref.value.data(), got, count * es) == 0) return -1;
    for (size_t i = 0; i < count; ++i) {
      if (std::memcmp(ref.value.data() + i * es, static_cast<const char*>(got) + i * es, es) != 0) return static_cast<long>(i);
    }
    return -1;
  }
  for (size_t i = 0; i < count; ++i) {
    const double a = load_value(t, got, i), b = load_value(t, ref.value.data(), i);
    if (!(std::fabs(a - b) <= ref.tol[i])) return static_cast<long>(i);
  }
  return -1;
}

// Shared, built once per process by whichever rank thread asks first.
inline const Reference& cached_reference(DataType t, ReduceOp op, int ranks, size_t count) {
  static std::mutex mu;
  static std::map<std::tuple<DataType, ReduceOp, int, size_t>, Reference> cache;
  std::lock_guard<std::mutex> l(mu);
  auto key = std::make_tuple(t, op, ranks, count);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make_reference(t, op, ranks, count)).first;
  return it->second;
}

inline const std::vector<char>& cached_input(DataType t, ReduceOp op, int rank, size_t count) {
  static std::mutex mu;
  static std::map<std::tuple<DataType, ReduceOp, int, size_t>, std::vector<char>> cache;
  std::lock_guard<std::mutex> l(mu);
  auto key = std::make_tuple(t, op, rank, count);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make_input(t, op, rank, count)).first;
  return it->second;
}

}  // namespace weft::coll::testing
