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
  if (rank == 0) peers::print_header(("gloo allreduce " + algo + ", tcp loopback").c_str(), size);
  for (size_t bytes = lo; bytes <= hi; bytes = std::max(bytes + 1, static_cast<size_t>(bytes * factor))) {
    const int count = static_cast<int>(std::max<size_t>(1, bytes / 4));
    std::vector<float> buf(static_cast<size_t>(count));
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = peers::input_of(rank, i);
    std::unique_ptr<gloo::Algorithm> a;
    std::vector<float*> ptrs = {buf.data()};
    if (algo == "ring") {
      a = std::make_unique<gloo::AllreduceRing<float>>(ctx, ptrs, count);
    } else {
      a = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, count);
    }
    a->run();  // verify once
    const long wrong = peers::count_wrong(buf, size);
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
    if (rank == 0) peers::print_row(buf.size(), us, size, static_cast<long>(w));
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
