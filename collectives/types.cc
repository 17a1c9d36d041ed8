#include <bit>
#include <cstring>

#include "weft/collectives/types.h"

namespace weft::coll {

std::string_view dtype_name(DataType t) {
  switch (t) {
    case DataType::kF32: return "f32";
    case DataType::kF64: return "f64";
    case DataType::kF16: return "f16";
    case DataType::kBF16: return "bf16";
    case DataType::kI32: return "i32";
    case DataType::kI64: return "i64";
    case DataType::kU8: return "u8";
  }
  return "?";
}

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
  }
  return "?";
}

std::optional<DataType> parse_dtype(std::string_view s) {
  for (DataType t : kAllDataTypes) {
    if (dtype_name(t) == s) return t;
  }
  if (s == "float") return DataType::kF32;
  if (s == "double") return DataType::kF64;
  if (s == "half") return DataType::kF16;
  return std::nullopt;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view s) {
  for (ReduceOp op : kAllReduceOps) {
    if (reduce_op_name(op) == s) return op;
  }
  return std::nullopt;
}

// _Float16 (GCC >= 12 on x86-64) converts with IEEE round-to-nearest-even,
// in hardware (F16C) where the CPU has it.
float f16_to_f32(uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }
uint16_t f32_to_f16(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t f32_to_bf16(float f) {
  uint32_t b = std::bit_cast<uint32_t>(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x40u);  // quiet NaN
  b += 0x7fffu + ((b >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(b >> 16);
}

}  // namespace weft::coll
