// Reduce kernels: the vectorised kernel against the plain scalar loop, per
// type and op, on 1 Mi elements (the ratio is the point: run both in one
// process). Verifies that both give the same bytes before timing.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "weft/collectives/types.h"

namespace {

using weft::coll::DataType;
using weft::coll::ReduceOp;

std::vector<char> filled(DataType t, size_t n, int seed) {
  std::vector<char> v(n * weft::coll::dtype_size(t));
  for (size_t i = 0; i < n; ++i) {
    const float x = static_cast<float>((i * 7 + static_cast<size_t>(seed)) % 13) * 0.5f + 1.0f;
    switch (t) {
      case DataType::kF32: reinterpret_cast<float*>(v.data())[i] = x; break;
      case DataType::kF64: reinterpret_cast<double*>(v.data())[i] = x; break;
      case DataType::kF16: reinterpret_cast<uint16_t*>(v.data())[i] = weft::coll::f32_to_f16(x); break;
      case DataType::kBF16: reinterpret_cast<uint16_t*>(v.data())[i] = weft::coll::f32_to_bf16(x); break;
      case DataType::kI32: reinterpret_cast<int32_t*>(v.data())[i] = static_cast<int32_t>(x); break;
      case DataType::kI64: reinterpret_cast<int64_t*>(v.data())[i] = static_cast<int64_t>(x); break;
      case DataType::kU8: reinterpret_cast<uint8_t*>(v.data())[i] = static_cast<uint8_t>(x); break;
    }
  }
  return v;
}

void BM_Reduce(benchmark::State& state) {
  const auto t = static_cast<DataType>(state.range(0));
  const auto op = static_cast<ReduceOp>(state.range(1));
  const bool vectorised = state.range(2) == 1;
  const size_t n = 1 << 20;
  auto src = filled(t, n, 3);
  auto a = filled(t, n, 5), b = a;
  weft::coll::reduce_into(a.data(), src.data(), n, t, op);
  weft::coll::reduce_into_scalar(b.data(), src.data(), n, t, op);
  if (a != b) {
    state.SkipWithError("vectorised and scalar kernels disagree");
    return;
  }
  auto dst = filled(t, n, 5);
  for (auto _ : state) {
    if (vectorised) {
      weft::coll::reduce_into(dst.data(), src.data(), n, t, op);
    } else {
      weft::coll::reduce_into_scalar(dst.data(), src.data(), n, t, op);
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(src.size()));
  state.SetLabel(std::string(weft::coll::dtype_name(t)) + " " + std::string(weft::coll::reduce_op_name(op)) +
                 (vectorised ? " vectorised" : " scalar"));
}

void args(benchmark::internal::Benchmark* b) {
  for (int t = 0; t < 7; ++t) {
    for (int op = 0; op < 4; ++op) {
      for (int v = 0; v < 2; ++v) b->Args({t, op, v});
    }
  }
}

}  // namespace

BENCHMARK(BM_Reduce)->Apply(args);
BENCHMARK_MAIN();
