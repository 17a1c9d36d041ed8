// Gloo peer driver: AllReduce of f32 sums with Gloo's ring and
// halving-doubling algorithms over its TCP transport on loopback, ranks as
// forked processes meeting through Gloo's file store. Prints the same
// columns as `weft bench` so bench/peers/compare.sh can line them up; every
// size is verified before it is timed (timing.h says how).
//   gloo_allreduce <ring|hd> <ranks> <min_bytes> <max_bytes> <factor> [batches]
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/barrier_all_to_one.h>
#include <gloo/allreduce_ring.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "timing.h"

namespace {

int run_rank(const std::string& algo, int rank, int size, const std::string& dir, size_t lo, size_t hi, double factor,
             int batches) {
  auto dev = gloo::transport::tcp::CreateDevice("127.0.0.1");
  gloo::rendezvous::FileStore store(dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(std::chrono::seconds(300));
  ctx->connectFullMesh(store, dev);
  if (rank == 0) {
    std::printf("# gloo allreduce %s: %d ranks, tcp loopback\n", algo.c_str(), size);
    std::printf("#%12s %12s %6s %6s %12s %11s %11s %7s\n", "size(B)", "count", "type", "redop", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  for (size_t bytes = lo; bytes <= hi; bytes = std::max(bytes + 1, static_cast<size_t>(bytes * factor))) {
    const int count = static_cast<int>(std::max<size_t>(1, bytes / 4));
    std::vector<float> buf(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) buf[static_cast<size_t>(i)] = static_cast<float>((rank * 3 + i % 11) % 13);
    std::unique_ptr<gloo::Algorithm> a;
    std::vector<float*> ptrs = {buf.data()};
    if (algo == "ring") {
      a = std::make_unique<gloo::AllreduceRing<float>>(ctx, ptrs, count);
    } else {
      a = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, count);
    }
    a->run();  // verify once
    long wrong = 0;
    for (int i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < size; ++r) want += static_cast<float>((r * 3 + i % 11) % 13);
      wrong += buf[static_cast<size_t>(i)] != want;
    }
    gloo::BarrierAllToOne barrier(ctx);
    std::vector<double> t = peers::batch_us(static_cast<size_t>(count) * 4, batches, [&] { a->run(); },
                                            [&] { barrier.run(); });
    // The slowest rank's time per batch, as weft bench reports; the best batch.
    std::vector<double*> tp = {t.data()};
    gloo::AllreduceRing<double>(ctx, tp, static_cast<int>(t.size()), gloo::ReductionFunction<double>::max).run();
    const double us = *std::min_element(t.begin(), t.end());
    std::vector<double*> wp;
    double w = static_cast<double>(wrong);
    wp.push_back(&w);
    gloo::AllreduceRing<double>(ctx, wp, 1).run();
    if (rank == 0) {
      const double b = static_cast<double>(count) * 4, algbw = b / us / 1e3;
      std::printf(" %12zu %12d %6s %6s %12.2f %11.3f %11.3f %7.0f\n", static_cast<size_t>(b), count, "f32", "sum", us,
                  algbw, algbw * 2.0 * (size - 1) / size, w);
      std::fflush(stdout);
    }
    if (bytes == hi) break;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr, "usage: gloo_allreduce <ring|hd> <ranks> <min_bytes> <max_bytes> <factor> [batches]\n");
    return 2;
  }
  const std::string algo = argv[1];
  const int size = std::atoi(argv[2]);
  const size_t lo = std::strtoull(argv[3], nullptr, 10), hi = std::strtoull(argv[4], nullptr, 10);
  const double factor = std::atof(argv[5]);
  const int batches = argc > 6 ? std::atoi(argv[6]) : 1;
  char tmpl[] = "/tmp/gloo-peer-XXXXXX";
  if (!mkdtemp(tmpl)) return 2;
  std::fflush(stdout);
  std::vector<pid_t> kids;
  for (int r = 0; r < size; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      try {
        _exit(run_rank(algo, r, size, tmpl, lo, hi, factor, batches));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gloo rank %d: %s\n", r, e.what());
        _exit(1);
      }
    }
    kids.push_back(pid);
  }
  int rc = 0;
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
  }
  std::string cmd = std::string("rm -rf ") + tmpl;
  return std::system(cmd.c_str()) == 0 ? rc : 1;
}
