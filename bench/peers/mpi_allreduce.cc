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
  if (rank == 0) peers::print_header("open mpi MPI_Allreduce", size);
  for (size_t bytes = lo; bytes <= hi; bytes = std::max(bytes + 1, static_cast<size_t>(bytes * factor))) {
    const int count = static_cast<int>(std::max<size_t>(1, bytes / 4));
    std::vector<float> buf(static_cast<size_t>(count));
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = peers::input_of(rank, i);
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long wrong = peers::count_wrong(buf, size);
    std::vector<double> t = peers::batch_us(
        static_cast<size_t>(count) * 4, batches,
        [&] { MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
        [] { MPI_Barrier(MPI_COMM_WORLD); });
    MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(t.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double us = *std::min_element(t.begin(), t.end());
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) peers::print_row(buf.size(), us, size, wrong);
    if (bytes == hi) break;
  }
  MPI_Finalize();
  return 0;
}
