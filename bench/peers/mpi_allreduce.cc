// Open MPI peer driver: MPI_Allreduce(MPI_IN_PLACE) of f32 sums, launched by
// mpirun with the TCP BTL or shared memory (vader) selected on the command
// line (bench/peers/compare.sh). Prints the same columns as `weft bench`;
// every size is verified before it is timed (timing.h says how).
//   mpirun -np N [--mca ...] mpi_allreduce <min_bytes> <max_bytes> <factor> [batches]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "timing.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 4 && argc != 5) {
    if (rank == 0) std::fprintf(stderr, "usage: mpi_allreduce <min_bytes> <max_bytes> <factor> [batches]\n");
    MPI_Finalize();
    return 2;
  }
  const size_t lo = std::strtoull(argv[1], nullptr, 10), hi = std::strtoull(argv[2], nullptr, 10);
  const double factor = std::atof(argv[3]);
  const int batches = argc > 4 ? std::atoi(argv[4]) : 1;
  if (rank == 0) {
    std::printf("# open mpi MPI_Allreduce: %d ranks\n", size);
    std::printf("#%12s %12s %6s %6s %12s %11s %11s %7s\n", "size(B)", "count", "type", "redop", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  for (size_t bytes = lo; bytes <= hi; bytes = std::max(bytes + 1, static_cast<size_t>(bytes * factor))) {
    const int count = static_cast<int>(std::max<size_t>(1, bytes / 4));
    std::vector<float> buf(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) buf[static_cast<size_t>(i)] = static_cast<float>((rank * 3 + i % 11) % 13);
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long wrong = 0;
    for (int i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < size; ++r) want += static_cast<float>((r * 3 + i % 11) % 13);
      wrong += buf[static_cast<size_t>(i)] != want;
    }
    std::vector<double> t = peers::batch_us(
        static_cast<size_t>(count) * 4, batches,
        [&] { MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
        [] { MPI_Barrier(MPI_COMM_WORLD); });
    MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(t.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double us = *std::min_element(t.begin(), t.end());
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
      const double b = static_cast<double>(count) * 4, algbw = b / us / 1e3;
      std::printf(" %12zu %12d %6s %6s %12.2f %11.3f %11.3f %7ld\n", static_cast<size_t>(b), count, "f32", "sum", us,
                  algbw, algbw * 2.0 * (size - 1) / size, wrong);
      std::fflush(stdout);
    }
    if (bytes == hi) break;
  }
  MPI_Finalize();
  return 0;
}
