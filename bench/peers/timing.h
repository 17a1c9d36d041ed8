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
#include <cstdio>
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

// Element i of `rank`'s input (the same as weft bench's, so that every
// library reduces the same numbers), and how many of `got` miss the exact
// sum over `ranks` ranks (small integers: f32 sums are exact).
inline float input_of(int rank, size_t i) { return static_cast<float>((rank * 3 + static_cast<int>(i % 11)) % 13); }

inline long count_wrong(const std::vector<float>& got, int ranks) {
  long wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    float want = 0;
    for (int r = 0; r < ranks; ++r) want += input_of(r, i);
    wrong += got[i] != want;
  }
  return wrong;
}

// weft bench's columns (nccl-tests'), so that compare.sh reads every driver alike.
inline void print_header(const char* what, int ranks) {
  std::printf("# %s: %d ranks\n", what, ranks);
  std::printf("#%12s %12s %6s %6s %12s %11s %11s %7s\n", "size(B)", "count", "type", "redop", "time(us)",
              "algbw(GB/s)", "busbw(GB/s)", "#wrong");
}

inline void print_row(size_t count, double us, int ranks, long wrong) {
  const double b = static_cast<double>(count) * 4, algbw = b / us / 1e3;
  std::printf(" %12zu %12zu %6s %6s %12.3f %11.3f %11.3f %7ld\n", count * 4, count, "f32", "sum", us, algbw,
              algbw * 2.0 * (ranks - 1) / ranks, wrong);
  std::fflush(stdout);
}

}  // namespace peers
