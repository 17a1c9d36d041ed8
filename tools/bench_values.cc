// bench_values.h: inputs and exact results of the collective benchmarks.
#include "bench_values.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace weft::cli {

// The exact value element i of `rank` starts with, and the expected result.
double input_of(const std::string& c, coll::ReduceOp op, int rank, size_t i) {
  if (c == "allreduce" || c == "reducescatter") {
    if (op == coll::ReduceOp::kProd) return (rank + static_cast<int>(i)) % 5 == 0 ? 2.0 : 1.0;
    return static_cast<double>((rank * 3 + static_cast<int>(i % 11)) % 13);
  }
  return static_cast<double>((rank * 7 + static_cast<int>(i % 17)) % 31);
}

void store_as(coll::DataType t, void* base, size_t i, double v) {
  switch (t) {
    case coll::DataType::kF32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case coll::DataType::kF64: static_cast<double*>(base)[i] = v; break;
    case coll::DataType::kF16: static_cast<uint16_t*>(base)[i] = coll::f32_to_f16(static_cast<float>(v)); break;
    case coll::DataType::kBF16: static_cast<uint16_t*>(base)[i] = coll::f32_to_bf16(static_cast<float>(v)); break;
    case coll::DataType::kI32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case coll::DataType::kI64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case coll::DataType::kU8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(static_cast<long>(v) & 255); break;
  }
}

double combine(coll::ReduceOp op, double a, double b) {
  switch (op) {
    case coll::ReduceOp::kSum: return a + b;
    case coll::ReduceOp::kProd: return a * b;
    case coll::ReduceOp::kMin: return std::min(a, b);
    case coll::ReduceOp::kMax: return std::max(a, b);
  }
  return a;
}

namespace {

// Every input_of pattern repeats with period 935 = lcm(5, 11, 17) in the
// element index: inputs and expected results are built for one period and
// copied or compared a period at a time (memcpy/memcmp speed, not a switch
// and a modulo per element: 16 ranks x 64 MiB took 8 s the slow way here).
constexpr size_t kPeriod = 935;

// Writes n elements whose element i is f(phase + i), one period computed.
template <typename F>
void fill_periodic(coll::DataType t, void* base, size_t n, size_t phase, F f) {
  const size_t es = coll::dtype_size(t);
  std::vector<char> period(kPeriod * es);
  for (size_t k = 0; k < kPeriod; ++k) store_as(t, period.data(), k, f((phase + k) % kPeriod));
  char* out = static_cast<char*>(base);
  for (size_t i = 0; i < n; i += kPeriod) std::memcpy(out + i * es, period.data(), std::min(kPeriod, n - i) * es);
}

}  // namespace

void fill_input(const std::string& c, coll::ReduceOp op, coll::DataType t, int rank, size_t n, void* base) {
  fill_periodic(t, base, n, 0, [&](size_t i) { return input_of(c, op, rank, i); });
}

int64_t count_wrong(const std::string& c, coll::ReduceOp op, coll::DataType t, int n, int me, size_t per, size_t elems,
                    const void* out) {
  const size_t es = coll::dtype_size(t);
  const char* got = static_cast<const char*>(out);
  auto compare = [&](const char* expect, const char* have, size_t count) {
    int64_t wrong = 0;
    for (size_t i = 0; i < count; i += kPeriod) {
      const size_t len = std::min(kPeriod, count - i) * es;
      if (std::memcmp(expect, have + i * es, len) == 0) continue;
      for (size_t k = 0; k < len; k += es) wrong += std::memcmp(expect + k, have + i * es + k, es) != 0;
    }
    return wrong;
  };
  std::vector<char> expect(kPeriod * es);
  if (c == "allgather") {
    // Block b is rank b's input.
    int64_t wrong = 0;
    for (int b = 0; b < n; ++b) {
      fill_periodic(t, expect.data(), kPeriod, 0, [&](size_t i) { return input_of(c, op, b, i); });
      wrong += compare(expect.data(), got + static_cast<size_t>(b) * per * es, per);
    }
    return wrong;
  }
  const size_t check = c == "reducescatter" ? per : elems;
  const size_t first = c == "reducescatter" ? static_cast<size_t>(me) * per : 0;
  fill_periodic(t, expect.data(), kPeriod, first % kPeriod, [&](size_t i) {
    if (c == "broadcast") return input_of(c, op, 0, i);
    double v = input_of(c, op, 0, i);
    for (int r = 1; r < n; ++r) v = combine(op, v, input_of(c, op, r, i));
    return v;
  });
  return compare(expect.data(), got, check);
}

}  // namespace weft::cli
