// Which pairs a communicator connects (communicator.h "Connections"): at
// setup exactly the peers of routing's HD and ring schedules, in a call the
// pairs its algorithm needs (Broadcast's tree, one-shot's every peer), every
// result exact; and 128 ranks over TCP within 2 log2(P) + 8 sockets each,
// counted by the transports and checked against /proc/self/fd.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "tcp/tcp_transport.h"
#include "weft/routing/schedule.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

// The ranks `rank` exchanges data with in routing's HD and ring AllReduce
// schedules on `ranks` ranks: butterfly pairs as HD does, ReduceScatter
// and AllGather run the ring.
std::set<int> scheduled_peers(int ranks, int rank) {
  std::set<int> out;
  for (auto c : {routing::Collective::kAllreduceHd, routing::Collective::kAllreduceRing}) {
    auto s = routing::build_schedule(c, ranks, 1 << 20);
    EXPECT_TRUE(s) << s.status().to_string();
    if (!s) continue;
    for (const routing::Step& st : s->steps) {
      for (const routing::Flow& f : st.flows) {
        if (f.src == rank) out.insert(f.dst);
        if (f.dst == rank) out.insert(f.src);
      }
    }
  }
  return out;
}

// MPICH's binomial tree from `root`: the parent and children of `rank`.
std::set<int> binomial_peers(int ranks, int rank, int root) {
  std::set<int> out;
  const int vr = (rank - root + ranks) % ranks;
  for (int mask = 1; mask < ranks; mask <<= 1) {
    if (vr & mask) {
      out.insert((vr - mask + root) % ranks);
      break;
    }
    if (vr + mask < ranks) out.insert((vr + mask + root) % ranks);
  }
  return out;
}

std::set<int> connected(Communicator& comm) {
  std::set<int> out;
  for (int p = 0; p < comm.size(); ++p) {
    Transport* t = p == comm.rank() ? nullptr : comm.transport_for(p);
    if (t != nullptr && t->pair(p) != nullptr) out.insert(p);
  }
  return out;
}

// Rank r's input: (r + 1) * (i % 7 + 1); the sum over P ranks is exact.
std::vector<int32_t> input(int rank, size_t count) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = (rank + 1) * static_cast<int32_t>(i % 7 + 1);
  return v;
}
bool is_sum(const std::vector<int32_t>& v, int ranks) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != ranks * (ranks + 1) / 2 * static_cast<int32_t>(i % 7 + 1)) return false;
  }
  return true;
}

// AllReduce with `a` (kAuto: whatever the size picks), exact.
void expect_allreduce_exact(Communicator& comm, Algorithm a, size_t count) {
  std::vector<int32_t> v = input(comm.rank(), count);
  CollectiveOptions o;
  o.algorithm = a;
  Status s = comm.allreduce(v.data(), v.data(), count, DataType::kI32, ReduceOp::kSum, o);
  ASSERT_TRUE(s) << s.to_string();
  EXPECT_TRUE(is_sum(v, comm.size())) << "rank " << comm.rank() << ": " << algorithm_name(a) << " x " << count;
}

void expect_reduce_scatter_and_allgather_exact(Communicator& comm) {
  const size_t per = 37, n = static_cast<size_t>(comm.size());
  std::vector<int32_t> all = input(comm.rank(), per * n), mine(per);
  Status s = comm.reduce_scatter(all.data(), mine.data(), per, DataType::kI32, ReduceOp::kSum);
  ASSERT_TRUE(s) << s.to_string();
  std::vector<int32_t> want = input(comm.size() * (comm.size() + 1) / 2 - 1, per * n);
  for (size_t i = 0; i < per; ++i) ASSERT_EQ(mine[i], want[static_cast<size_t>(comm.rank()) * per + i]) << i;
  s = comm.allgather(mine.data(), all.data(), per, DataType::kI32);
  ASSERT_TRUE(s) << s.to_string();
  EXPECT_EQ(all, want);
}

void expect_broadcast_exact(Communicator& comm, int root) {
  std::vector<int32_t> v(1001, comm.rank() == root ? 1000 + root : -1);
  Status s = comm.broadcast(v.data(), v.size(), DataType::kI32, root);
  ASSERT_TRUE(s) << s.to_string();
  EXPECT_EQ(v, std::vector<int32_t>(1001, 1000 + root)) << "rank " << comm.rank() << ", root " << root;
}

class Connections : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

// Setup connects the schedule's peers and no others; kAuto's AllReduce at
// every size (butterfly, HD, ring), ReduceScatter, AllGather and barrier
// connect nothing more; a Broadcast connects its tree and one-shot every
// peer, in the call, with exact results.
TEST_P(Connections, SetupConnectsTheSchedulesPeersAndACallTheRestItNeeds) {
  const auto [transport, ranks] = GetParam();
  run_ranks(
      ranks,
      [&, ranks = ranks](Communicator& comm) {
        const std::set<int> setup = scheduled_peers(ranks, comm.rank());
        EXPECT_EQ(connected(comm), setup) << "rank " << comm.rank() << " after setup";
        for (size_t count : {size_t{1}, size_t{4099}, size_t{1} << 18}) {
          expect_allreduce_exact(comm, Algorithm::kAuto, count);
          expect_allreduce_exact(comm, Algorithm::kHalvingDoubling, count);
          expect_allreduce_exact(comm, Algorithm::kRing, count);
          expect_allreduce_exact(comm, Algorithm::kButterfly, count);
        }
        expect_reduce_scatter_and_allgather_exact(comm);
        ASSERT_TRUE(comm.barrier());
        EXPECT_EQ(connected(comm), setup) << "rank " << comm.rank() << " after the scheduled algorithms";
        const int root = ranks - 2;
        expect_broadcast_exact(comm, root);
        std::set<int> want = setup;
        for (int p : binomial_peers(ranks, comm.rank(), root)) want.insert(p);
        EXPECT_EQ(connected(comm), want) << "rank " << comm.rank() << " after a broadcast from " << root;
        expect_allreduce_exact(comm, Algorithm::kOneShot, 4099);
        EXPECT_EQ(connected(comm).size(), static_cast<size_t>(ranks - 1)) << "rank " << comm.rank() << " after one-shot";
        expect_allreduce_exact(comm, Algorithm::kAuto, 4099);
      },
      [&, transport = transport, ranks = ranks](CommConfig& c) {
        c.transport = transport;
        c.selection.oneshot_max_ranks = 0;  // kAuto never one-shot: the setup set is the schedule's
        c.shm.slot_bytes = 16 << 10;        // 33 ranks' segments stay small
        if (ranks == 13) c.tcp.connections_per_peer = 2;  // striped pairs connected on demand too
      });
}

INSTANTIATE_TEST_SUITE_P(Collectives, Connections,
                         ::testing::Combine(::testing::Values("loopback", "tcp", "shm"), ::testing::Values(5, 13, 33)),
                         [](const auto& p) { return std::get<0>(p.param) + "_" + std::to_string(std::get<1>(p.param)) + "ranks"; });

class ConnectOnDemand : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

// CommConfig::connect_on_demand: setup connects no pair; HD AllReduce then
// connects exactly its partners (rank XOR 2^k on a power of two), exact.
TEST_P(ConnectOnDemand, SetupConnectsNothingAndACallOnlyItsAlgorithmsPeers) {
  const auto [transport, ranks] = GetParam();
  run_ranks(
      ranks,
      [&, ranks = ranks](Communicator& comm) {
        EXPECT_EQ(connected(comm), std::set<int>{}) << "rank " << comm.rank() << " after setup";
        expect_allreduce_exact(comm, Algorithm::kHalvingDoubling, 4099);
        std::set<int> partners;
        for (int d = 1; d < ranks; d <<= 1) partners.insert(comm.rank() ^ d);
        EXPECT_EQ(connected(comm), partners) << "rank " << comm.rank() << " after HD";
      },
      [&, transport = transport](CommConfig& c) {
        c.transport = transport;
        c.connect_on_demand = true;
      });
}

INSTANTIATE_TEST_SUITE_P(Collectives, ConnectOnDemand,
                         ::testing::Combine(::testing::Values("loopback", "tcp"), ::testing::Values(8, 16)),
                         [](const auto& p) { return std::get<0>(p.param) + "_" + std::to_string(std::get<1>(p.param)) + "ranks"; });

// A pair connected on demand with a rank that has gone (its communicator
// closed, its listening socket with it): every other rank's call fails at
// once naming it — refused, hung up, or told by a peer that saw it go —
// and none waits out its timeout. On 8 ranks rank 3 is not connected to 0,
// 5 and 6 at setup (HD's partners and the ring's neighbours).
TEST(Connections, ACallThatNeedsAPairWithAGoneRankFailsAtOnceNamingIt) {
  constexpr int kRanks = 8, kGone = 3;
  MemoryStore store;
  std::atomic<bool> gone{false};
  std::atomic<int> past_setup{0}, failed{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      CommConfig cfg;
      cfg.rank = r;
      cfg.size = kRanks;
      cfg.transport = "tcp";
      cfg.timeout = 20s;
      auto comm = Communicator::create(cfg, store);
      ASSERT_TRUE(comm) << comm.status().to_string();
      expect_allreduce_exact(**comm, Algorithm::kHalvingDoubling, 1031);
      ++past_setup;
      if (r == kGone) {
        EXPECT_EQ(connected(**comm), scheduled_peers(kRanks, r));
        while (past_setup < kRanks) std::this_thread::sleep_for(1ms);  // every call of the others done
        comm->reset();
        gone = true;
        return;
      }
      while (!gone) std::this_thread::sleep_for(1ms);
      std::vector<int32_t> v = input(r, 1031);
      CollectiveOptions o;
      o.algorithm = Algorithm::kOneShot;
      const auto start = Clock::now();
      Status s = (*comm)->allreduce(v.data(), v.data(), v.size(), DataType::kI32, ReduceOp::kSum, o);
      const auto took = Clock::now() - start;
      EXPECT_FALSE(s) << "rank " << r;
      EXPECT_NE(s.message().find("rank 3"), std::string::npos) << "rank " << r << ": " << s.to_string();
      EXPECT_LT(took, 5s) << "rank " << r << ": " << s.to_string();
      // Open until every call ended: a rank that gave up and left would be
      // refused in turn (the connect then waits a moment for its reason).
      ++failed;
      while (failed < kRanks - 1) std::this_thread::sleep_for(1ms);
    });
  }
  for (auto& t : threads) t.join();
}

// Sockets (S_IFSOCK) among this process's descriptors.
int sockets_in_this_process() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string().rfind("socket:", 0) == 0) ++n;
  }
  return n;
}

// 128 ranks as threads over loopback TCP: HD and ring exact, and no rank
// holds more than 2 log2(P) + 8 sockets. The ranks share this process's
// descriptor table, so each counts what its transport holds, and the sum
// must be every socket /proc/self/fd shows.
TEST(Connections, TcpRanksHoldAtMostTwoLog2PPlusEightSocketsEachAt128Ranks) {
  constexpr int kRanks = 128;
  const int bound = 2 * 7 + 8;
  // Every rank's epoll and eventfd besides its sockets, all in one table:
  // more than a default soft limit of 1024 descriptors.
  const rlim_t need = kRanks * (bound + 4) + 256;
  rlimit lim{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_cur < need) {
    if (lim.rlim_max < need) GTEST_SKIP() << "RLIMIT_NOFILE hard limit " << lim.rlim_max << " < " << need;
    lim.rlim_cur = need;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lim), 0);
  }
  const int before = sockets_in_this_process();
  std::atomic<int> held{0}, arrived{0};
  std::atomic<int> total{-1};  // counted by the last rank to arrive, while every communicator is open
  run_ranks(
      kRanks,
      [&](Communicator& comm) {
        expect_allreduce_exact(comm, Algorithm::kHalvingDoubling, 1031);
        expect_allreduce_exact(comm, Algorithm::kRing, 1031);
        expect_allreduce_exact(comm, Algorithm::kAuto, 3);
        expect_reduce_scatter_and_allgather_exact(comm);
        expect_broadcast_exact(comm, 0);
        EXPECT_EQ(connected(comm), scheduled_peers(kRanks, comm.rank())) << "rank " << comm.rank();
        auto* info = dynamic_cast<tcp::TcpTransportInfo*>(comm.transport_for((comm.rank() + 1) % kRanks));
        ASSERT_NE(info, nullptr);
        const int mine = info->socket_count();
        EXPECT_LE(mine, bound) << "rank " << comm.rank();
        held += mine;
        if (++arrived == kRanks) total = sockets_in_this_process() - before;
        const auto stop = Clock::now() + 60s;  // a rank that failed to start never arrives
        while (total < 0 && Clock::now() < stop) std::this_thread::sleep_for(1ms);
      },
      [&](CommConfig& c) {
        c.transport = "tcp";
        c.timeout = 120s;
      });
  std::printf("[sockets] %d ranks: %d sockets in all, %.1f per rank (bound %d)\n", kRanks, held.load(),
              static_cast<double>(held.load()) / kRanks, bound);
  EXPECT_EQ(total.load(), held.load()) << "sockets in /proc/self/fd against the transports' counts";
}

}  // namespace
}  // namespace weft::coll::testing
