// Element types and reduction operators of the collective library.
//
//   weft::coll::DataType t = weft::coll::DataType::kF32;
//   size_t bytes = count * weft::coll::dtype_size(t);
//   auto op = weft::coll::parse_reduce_op("sum");   // std::optional<ReduceOp>
//
// f16 is IEEE 754 binary16, bf16 is the upper half of a binary32 (Google
// Brain float). Both are reduced in f32 and rounded back to nearest-even
// after every pairwise step, as NCCL and Gloo do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace weft::coll {

enum class DataType : uint8_t { kF32, kF64, kF16, kBF16, kI32, kI64, kU8 };
enum class ReduceOp : uint8_t { kSum, kProd, kMin, kMax };

inline constexpr DataType kAllDataTypes[] = {DataType::kF32, DataType::kF64, DataType::kF16,
                                             DataType::kBF16, DataType::kI32, DataType::kI64,
                                             DataType::kU8};
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin,
                                             ReduceOp::kMax};

constexpr size_t dtype_size(DataType t) {
  switch (t) {
    case DataType::kF32: return 4;
    case DataType::kF64: return 8;
    case DataType::kF16: return 2;
    case DataType::kBF16: return 2;
    case DataType::kI32: return 4;
    case DataType::kI64: return 8;
    case DataType::kU8: return 1;
  }
  return 1;
}

std::string_view dtype_name(DataType t);   // "f32", "f64", "f16", "bf16", "i32", "i64", "u8"
std::string_view reduce_op_name(ReduceOp op);  // "sum", "prod", "min", "max"
std::optional<DataType> parse_dtype(std::string_view s);
std::optional<ReduceOp> parse_reduce_op(std::string_view s);

// dst[i] = dst[i] (op) src[i] for i < count. Vectorised (AVX2/F16C where the
// CPU has them, chosen once at load time; SSE2 otherwise). dst and src must
// not overlap. Float min and max are IEEE 754-2019 minimum and maximum: NaN
// when either operand is NaN (a NaN on any rank is every rank's result), -0
// below +0; both give the same bits with their operands swapped.
void reduce_into(void* dst, const void* src, size_t count, DataType t, ReduceOp op);

// The same as reduce_into, written as one plain scalar loop per element and
// compiled without auto-vectorisation: the baseline that bench/reduce_bench
// measures the kernels against, and the reference the tests use.
void reduce_into_scalar(void* dst, const void* src, size_t count, DataType t, ReduceOp op);

// binary16 / bfloat16 <-> binary32, round to nearest even; NaN stays NaN.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

}  // namespace weft::coll
