// How every driver of bench/peers/compare.sh times a size (weft bench
// --batches does the same, tools/cmd_bench.cc): `iters` calls by the
// nccl-tests-like rule clamp(512 MiB / size, 5, 200), split into `batches`
// batches; the reported time per call is the best batch's mean. The host is
// shared with other work: a batch that lost its CPU measures the neighbours,
// not the library, and every library gets the same chances.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace peers {

inline int iters_for(size_t bytes) {
  return static_cast<int>(std::clamp<size_t>((size_t{1} << 29) / std::max<size_t>(bytes, 1), 5, 200));
}

// Runs `call` in `batches` batches (after one untimed batch) and returns
// each batch's mean time per call in microseconds. `sync` runs before each
// batch (a barrier, so that the ranks start together). The driver then takes
// the slowest rank's time per batch (an allreduce-max over the vector) and
// reports the best batch.
template <typename Call, typename Sync>
std::vector<double> batch_us(size_t bytes, int batches, Call call, Sync sync) {
  const int per = std::max(1, iters_for(bytes) / std::max(1, batches));
  for (int i = 0; i < std::max(2, per); ++i) call();
  std::vector<double> us;
  for (int b = 0; b < batches; ++b) {
    sync();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < per; ++i) call();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / per);
  }
  return us;
}

}  // namespace peers
