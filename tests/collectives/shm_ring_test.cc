// The shared-memory ring (collectives/shm/shm_ring.h) as real processes:
// every rank streams messages of awkward sizes to every other rank, both
// directions at once, through an 8 KiB ring so that frames land at every
// line of it, straddle its end (skip frames, cut frames) and stream in
// pieces; every byte is checked, and the bytes around each receive too.
// And the doorbell (collectives/shm/shm_segment.h, ring_bell): ranks that
// sleep before nearly every message must be woken for each one.
#include <fmt/format.h>
#include <sys/resource.h>
#include <time.h>

#include <random>

#include "processes.h"
#include "values.h"
#include "weft/collectives/communicator.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

constexpr size_t kSlot = 4096;
constexpr int kSlots = 2;
constexpr size_t kRing = kSlot * kSlots;
constexpr size_t kGuard = 16;

// The sizes rank `src` sends to `dst`, in order: one-line messages (40
// bytes, one frame line each) shift where the next frame starts by one
// line, so that over the rounds the large and awkward messages start at
// every line of the ring.
std::vector<size_t> message_sizes() {
  const std::vector<size_t> awkward{0, 1, 47, 48, 49, 63, 64, 65, 3, 5, 7, 13, 1023, 4095, 4096, 4097};
  std::vector<size_t> sizes;
  for (size_t round = 0; round <= kRing / 64; ++round) {
    sizes.push_back(40);
    sizes.push_back(kRing - 1);
    sizes.push_back(awkward[round % awkward.size()]);
    sizes.push_back(kRing + 13);
    sizes.push_back(40 - round % 41);
  }
  return sizes;
}

uint8_t byte_at(int src, int dst, size_t msg, size_t i) {
  return static_cast<uint8_t>((i * 131 + msg * 7919 + static_cast<size_t>(src) * 31 + static_cast<size_t>(dst) * 17) >> 3);
}

// A communicator over the 8 KiB rings; nullptr after printing why not.
std::unique_ptr<Communicator> open_comm(const std::string& dir, int rank, int n, size_t single_copy_min,
                                        const ShmOptions& shm = {}) {
  auto store = open_store("file:" + dir, rank, Clock::now() + 30s);
  if (!store) return nullptr;
  CommConfig cfg;
  cfg.rank = rank;
  cfg.size = n;
  cfg.transport = "shm";
  cfg.timeout = 30s;
  cfg.shm = shm;
  cfg.shm.slot_bytes = kSlot;
  cfg.shm.slots = kSlots;
  cfg.shm.single_copy_min_bytes = single_copy_min;
  auto comm = Communicator::create(cfg, **store);
  if (!comm) {
    std::fprintf(stderr, "rank %d: %s\n", rank, comm.status().to_string().c_str());
    return nullptr;
  }
  return std::move(*comm);
}

int run_rank(const std::string& dir, int rank, int n, size_t single_copy_min) {
  auto comm = open_comm(dir, rank, n, single_copy_min);
  if (!comm) return 3;
  const std::vector<size_t> sizes = message_sizes();
  const Deadline deadline = Clock::now() + 60s;
  // Per peer: a send buffer and a receive buffer (with guards) per message
  // of a batch, all posted before any wait, so both directions run at once.
  constexpr size_t kBatch = 7;
  for (size_t first = 0; first < sizes.size(); first += kBatch) {
    const size_t last = std::min(first + kBatch, sizes.size());
    struct Posted {
      int peer;
      size_t msg;
      std::vector<uint8_t> out, in;
      std::unique_ptr<HostMemory> out_mem, in_mem;
      Ticket st = 0, rt = 0;
    };
    std::vector<Posted> posted;
    posted.reserve((last - first) * static_cast<size_t>(n));
    for (size_t m = first; m < last; ++m) {
      for (int peer = 0; peer < n; ++peer) {
        if (peer == rank) continue;
        Posted& p = posted.emplace_back();
        p.peer = peer;
        p.msg = m;
        p.out.resize(sizes[m]);
        for (size_t i = 0; i < sizes[m]; ++i) p.out[i] = byte_at(rank, peer, m, i);
        p.in.assign(sizes[m] + 2 * kGuard, 0xA5);
        p.out_mem = std::make_unique<HostMemory>(p.out.data(), p.out.size());
        p.in_mem = std::make_unique<HostMemory>(p.in.data(), p.in.size());
        Pair* pair = comm->transport_for(peer)->pair(peer);
        auto rt = pair->recv(*p.in_mem, kGuard, sizes[m]);
        auto st = pair->send(*p.out_mem, 0, sizes[m]);
        if (!rt || !st) return 4;
        p.rt = *rt;
        p.st = *st;
      }
    }
    for (Posted& p : posted) {
      Pair* pair = comm->transport_for(p.peer)->pair(p.peer);
      Status s = pair->wait_recv(p.rt, deadline);
      if (s) s = pair->wait_send(p.st, deadline);
      if (!s) {
        std::fprintf(stderr, "rank %d, message %zu with rank %d: %s\n", rank, p.msg, p.peer, s.to_string().c_str());
        return 5;
      }
      for (size_t i = 0; i < p.in.size(); ++i) {
        const bool guard = i < kGuard || i >= kGuard + sizes[p.msg];
        const uint8_t want = guard ? 0xA5 : byte_at(p.peer, rank, p.msg, i - kGuard);
        if (p.in[i] != want) {
          std::fprintf(stderr, "rank %d: message %zu (%zu bytes) from rank %d: byte %zd is %u, want %u\n", rank, p.msg,
                       sizes[p.msg], p.peer, static_cast<ssize_t>(i) - static_cast<ssize_t>(kGuard), p.in[i], want);
          return 6;
        }
      }
    }
  }
  return 0;
}

// Sleeps before nearly every message: the ranks take turns to talk, and the
// talker first pauses 3-12 us (busy), around how long a listener polls
// (spin_us 0: 5 us of polling, then the futex), so the listeners go to sleep
// just before, during or after the talker's news lands; every 8th round it
// pauses in nanosleep (50 us or more), so they are surely asleep. With the
// publisher's fence and the sleeper's membarrier both removed, the 3-rank
// case lost a wake-up here at round 19168 of its first run. The sizes include ones larger
// than the ring (the talker waits for room, woken by the listener's tail)
// and, with single_copy_min 5000, ones the talker waits to be acked for.
// A sleep lasts up to sleep_ms = 10 minutes, past the 20 s deadline: a lost
// wake-up fails the wait ("timed out") instead of costing 10 ms.
int run_wake_rank(const std::string& dir, int rank, int n, size_t single_copy_min) {
  ShmOptions shm;
  shm.spin_us = 0;
  shm.sleep_ms = 600000;
  auto comm = open_comm(dir, rank, n, single_copy_min, shm);
  if (!comm) return 3;
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  const std::vector<size_t> sizes{4, 0, 13, 40, 41, 1023, 7, kRing + 13, 64, 5, 4097, 3};
  constexpr int kRounds = 20000;
  std::mt19937 rng(static_cast<unsigned>(rank) * 7919u + 13u);
  std::vector<uint8_t> out, in;
  for (int round = 0; round < kRounds; ++round) {
    const int talker = round % n;
    const size_t len = sizes[static_cast<size_t>(round) % sizes.size()];
    const Deadline deadline = Clock::now() + 20s;
    auto fail = [&](int peer, const Status& s) {
      std::fprintf(stderr, "rank %d, round %d (%zu bytes) with rank %d: %s\n", rank, round, len, peer,
                   s.to_string().c_str());
      return 5;
    };
    if (rank == talker) {
      if (round % 8 == 7) {
        const timespec pause{0, 1000};
        ::nanosleep(&pause, nullptr);
      } else {
        const auto until = Clock::now() + std::chrono::nanoseconds((3'000 + rng() % 9'000));
        while (Clock::now() < until) {
        }
      }
      out.resize(len);
      for (int peer = 0; peer < n; ++peer) {
        if (peer == rank) continue;
        for (size_t i = 0; i < len; ++i) out[i] = byte_at(rank, peer, static_cast<size_t>(round), i);
        HostMemory mem(out.data(), out.size());
        Pair* pair = comm->transport_for(peer)->pair(peer);
        auto t = pair->send(mem, 0, len);
        Status s = t ? pair->wait_send(*t, deadline) : t.status();
        if (!s) return fail(peer, s);
      }
      continue;
    }
    in.assign(len, 0xA5);
    HostMemory mem(in.data(), in.size());
    Pair* pair = comm->transport_for(talker)->pair(talker);
    auto t = pair->recv(mem, 0, len);
    Status s = t ? pair->wait_recv(*t, deadline) : t.status();
    if (!s) return fail(talker, s);
    for (size_t i = 0; i < len; ++i) {
      if (in[i] != byte_at(talker, rank, static_cast<size_t>(round), i)) {
        std::fprintf(stderr, "rank %d: round %d (%zu bytes) from rank %d: byte %zu is wrong\n", rank, round, len,
                     talker, i);
        return 6;
      }
    }
  }
  // The sleep path ran: a futex sleep is a voluntary context switch
  // (getrusage(2) ru_nvcsw; a sched_yield is not one), and a listener sleeps
  // in many of its rounds. Where the ranks outnumber the CPUs (3 ranks here)
  // a listener yields to the talker instead of polling (shm_transport.cc
  // wait), so more news lands before it sleeps: with two 3-rank cases at
  // once under ctest -j2 (load 11) listeners slept 1356-1411 times in 20000
  // rounds, under the 1666 this once asked for.
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  const long sleeps = after.ru_nvcsw - before.ru_nvcsw;
  if (sleeps < kRounds / (8 * n)) {
    std::fprintf(stderr, "rank %d: only %ld voluntary context switches in %d rounds: the sleep path did not run\n",
                 rank, sleeps, kRounds);
    return 7;
  }
  return 0;
}

// Halving-doubling and butterfly AllReduce reduce straight from the ring
// (ExchangePair::exchange_reduce): with the 8 KiB ring, vectors larger than
// it arrive as cut frames whose payloads end at every line, and each must
// hold whole elements (2-byte f16, 8-byte f64); with single_copy_min 5000
// the large blocks are read from the sender and reduced from scratch.
// Butterfly on 2 ranks reduces into the vector it sends (butterfly_lane.cc):
// small ones after the send went into the ring whole, larger ones than the
// ring only once their last frame left (queued_exchange). Inputs are small
// integers, so every result is exact.
int run_reduce_rank(const std::string& dir, int rank, int n, size_t single_copy_min, Algorithm a) {
  auto comm = open_comm(dir, rank, n, single_copy_min);
  if (!comm) return 3;
  CollectiveOptions o;
  o.algorithm = a;
  const std::vector<size_t> counts{1, 7, 1023, kRing / 2 + 3, 3 * kRing + 5};
  for (DataType t : {DataType::kF64, DataType::kF16, DataType::kI32, DataType::kU8}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
      for (size_t count : counts) {
        auto value = [&](int r, size_t i) { return static_cast<double>((r * 3 + static_cast<int>(i % 11)) % 13); };
        std::vector<double> in(count), want(count);
        for (size_t i = 0; i < count; ++i) {
          in[i] = value(rank, i);
          want[i] = value(0, i);
          for (int r = 1; r < n; ++r) want[i] = op == ReduceOp::kSum ? want[i] + value(r, i) : std::max(want[i], value(r, i));
        }
        std::vector<uint8_t> buf(count * dtype_size(t));
        for (size_t i = 0; i < count; ++i) store_value(t, buf.data(), i, in[i]);
        if (Status s = comm->allreduce(buf.data(), buf.data(), count, t, op, o); !s) {
          std::fprintf(stderr, "rank %d: %s\n", rank, s.to_string().c_str());
          return 5;
        }
        for (size_t i = 0; i < count; ++i) {
          const double got = load_value(t, buf.data(), i);
          if (got != want[i]) {
            std::fprintf(stderr, "rank %d: %s %s x %zu: element %zu is %g, want %g\n", rank, std::string(dtype_name(t)).c_str(),
                         std::string(reduce_op_name(op)).c_str(), count, i, got, want[i]);
            return 6;
          }
        }
      }
    }
  }
  return 0;
}

int run_hd_rank(const std::string& dir, int rank, int n, size_t single_copy_min) {
  return run_reduce_rank(dir, rank, n, single_copy_min, Algorithm::kHalvingDoubling);
}
int run_butterfly_rank(const std::string& dir, int rank, int n, size_t single_copy_min) {
  return run_reduce_rank(dir, rank, n, single_copy_min, Algorithm::kButterfly);
}

// ranks, single_copy_min_bytes (0: every message through the ring; 5000:
// the ring-sized ones single-copy, between inline frames).
class ShmRing : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

// Runs body(dir, rank, n, single_copy_min) in n processes; each must exit 0.
void expect_ranks_succeed(int n, size_t single_copy_min, int (*body)(const std::string&, int, int, size_t)) {
  Children kids;
  kids.start(n, [&](int rank) { return body(kids.dir, rank, n, single_copy_min); });
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (size_t r = 0; r < static_cast<size_t>(n); ++r) EXPECT_EQ(kids.wait(r, deadline), 0) << "rank " << r;
}

TEST_P(ShmRing, AwkwardSizesAtEveryRingOffsetArriveExactInBothDirections) {
  expect_ranks_succeed(std::get<0>(GetParam()), std::get<1>(GetParam()), run_rank);
}

TEST_P(ShmRing, HalvingDoublingReducesFromTheRingExactlyForEveryElementSize) {
  expect_ranks_succeed(std::get<0>(GetParam()), std::get<1>(GetParam()), run_hd_rank);
}

TEST_P(ShmRing, ButterflyReducesIntoItsOwnSendExactlyForEveryElementSize) {
  expect_ranks_succeed(std::get<0>(GetParam()), std::get<1>(GetParam()), run_butterfly_rank);
}

TEST_P(ShmRing, RanksThatSleepBeforeEveryMessageAreWokenForEachOne) {
  expect_ranks_succeed(std::get<0>(GetParam()), std::get<1>(GetParam()), run_wake_rank);
}

INSTANTIATE_TEST_SUITE_P(Collectives, ShmRing,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Values(size_t{0}, size_t{5000})),
                         [](const auto& p) {
                           return fmt::format("{}ranks_singlecopy{}", std::get<0>(p.param), std::get<1>(p.param));
                         });

}  // namespace
}  // namespace weft::coll::testing
