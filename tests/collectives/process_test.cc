// Ranks as real processes over TCP and shared memory: a smaller correctness
// matrix, the planned source ports (getsockname/getpeername on both ends),
// and faults (a rank killed or stopped mid-AllReduce).
#include <fmt/format.h>

#include <random>
#include <regex>

#include "processes.h"
#include "rounds_plan.h"
#include "tcp/tcp_transport.h"
#include "values.h"
#include "weft/collectives/communicator.h"
#include "weft/routing/gates.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

Result<std::unique_ptr<Communicator>> open_comm(const std::string& dir, int rank, int n, const std::string& transport,
                                                std::chrono::milliseconds timeout,
                                                const std::function<void(CommConfig&)>& tweak = {}) {
  static std::unique_ptr<Store> store;  // one per child process
  WEFT_ASSIGN_OR_RETURN(store, open_store("file:" + dir, rank, Clock::now() + 30s));
  CommConfig cfg;
  cfg.rank = rank;
  cfg.size = n;
  cfg.transport = transport;
  cfg.timeout = timeout;
  if (tweak) tweak(cfg);
  return Communicator::create(cfg, *store);
}

int complain(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  return 1;
}

class ProcessMatrix : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(ProcessMatrix, EveryAlgorithmIsExactAcrossProcesses) {
  const auto [transport, n] = GetParam();
  // References and inputs before forking: every rank inherits them.
  for (DataType t : {DataType::kF32, DataType::kI32, DataType::kBF16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
      cached_reference(t, op, n);
      for (int r = 0; r < n; ++r) input_period(t, op, r);
    }
  }
  Children kids;
  kids.start(n, [&, transport = transport, n = n](int rank) {
    auto comm = open_comm(kids.dir, rank, n, transport, 60s, [&](CommConfig& c) { c.host = "h" + std::to_string(c.rank / 2); });
    if (!comm) return complain(comm.status().to_string());
    for (Algorithm a : {Algorithm::kHalvingDoubling, Algorithm::kRing, Algorithm::kButterfly}) {
      for (DataType t : {DataType::kF32, DataType::kI32, DataType::kBF16}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
          for (size_t count : {size_t{0}, size_t{7}, size_t{1023}, size_t{262147}}) {
            auto in = make_input(t, op, rank, count);
            CollectiveOptions o;
            o.algorithm = a;
            if (Status s = (*comm)->allreduce(in.data(), in.data(), count, t, op, o); !s) return complain(s.to_string());
            if (first_mismatch(t, cached_reference(t, op, n), in.data(), count) != -1) {
              return complain(fmt::format("rank {}: {} {} {} count {} is wrong", rank, algorithm_name(a), dtype_name(t),
                                          reduce_op_name(op), count));
            }
          }
        }
      }
    }
    // The other collectives once each, with a whole-vector check.
    const size_t per = 1001;
    std::vector<int32_t> all(per * static_cast<size_t>(n)), mine(per);
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = rank * 100000 + static_cast<int32_t>(i);
    if (Status s = (*comm)->allgather(mine.data(), all.data(), per, DataType::kI32); !s) return complain(s.to_string());
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i] != static_cast<int32_t>(i / per) * 100000 + static_cast<int32_t>(i % per)) return complain("allgather wrong");
    }
    if (Status s = (*comm)->reduce_scatter(all.data(), mine.data(), per, DataType::kI32, ReduceOp::kSum); !s) {
      return complain(s.to_string());
    }
    for (size_t i = 0; i < per; ++i) {
      if (mine[i] != n * (rank * 100000 + static_cast<int32_t>(i))) return complain("reduce_scatter wrong");
    }
    std::vector<int32_t> b(777, rank);
    if (Status s = (*comm)->broadcast(b.data(), b.size(), DataType::kI32, n - 1); !s) return complain(s.to_string());
    for (int32_t x : b) {
      if (x != n - 1) return complain("broadcast wrong");
    }
    return 0;
  });
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  for (size_t r = 0; r < static_cast<size_t>(n); ++r) EXPECT_EQ(kids.wait(r, deadline), 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Collectives, ProcessMatrix,
                         ::testing::Combine(::testing::Values("tcp", "shm", "auto"), ::testing::Values(2, 3, 5)),
                         [](const auto& p) { return std::get<0>(p.param) + "_" + std::to_string(std::get<1>(p.param)) + "ranks"; });

// A plan for every directed pair: sport = base + 1 + 16 * src + dst, every
// flow into rank d has dport = base + 1000 + d.
routing::RoutePlan make_plan(int n, int base) {
  routing::RoutePlan plan;
  plan.collective = "allreduce-hd";
  plan.ranks = n;
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      routing::PlanFlow f;
      f.src_rank = s;
      f.dst_rank = d;
      f.protocol = "tcp";
      f.sport = static_cast<uint16_t>(base + 1 + 16 * s + d);
      f.dport = static_cast<uint16_t>(base + 1000 + d);
      plan.flows.push_back(f);
    }
  }
  return plan;
}

TEST(PlannedRoutes, EveryTcpConnectionUsesThePlannedSourcePortOnBothEnds) {
  const int n = 4;
  std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 3; ++attempt) {
    // A random base keeps parallel runs apart; a port taken by someone else
    // shows as a bind error, and the test tries another base.
    const int base = 20000 + static_cast<int>(rng() % 30000);
    const routing::RoutePlan plan = make_plan(n, base);
    Children kids;
    kids.start(n, [&](int rank) {
      auto comm = open_comm(kids.dir, rank, n, "tcp", 20s, [&](CommConfig& c) { c.plan = plan; });
      if (!comm) return comm.status().message().find("bind") != std::string::npos ? 42 : complain(comm.status().to_string());
      for (int p = 0; p < n; ++p) {
        if (p == rank) continue;
        auto* info = dynamic_cast<tcp::TcpTransportInfo*>((*comm)->transport_for(p));
        if (!info) return complain("not a TCP transport");
        for (const auto& c : info->connection_ports(p)) {
          // Outgoing: getsockname = our planned sport, getpeername = the peer's
          // listen port. Incoming: getpeername = the peer's planned sport.
          const auto* f = c.outgoing ? plan.find(rank, p) : plan.find(p, rank);
          const uint16_t want_local = c.outgoing ? f->sport : f->dport;
          const uint16_t want_remote = c.outgoing ? f->dport : f->sport;
          if (c.local_port != want_local || c.remote_port != want_remote) {
            return complain(fmt::format("rank {} {} connection with rank {}: ports {} -> {}, planned {} -> {}", rank,
                                        c.outgoing ? "outgoing" : "incoming", p, c.local_port, c.remote_port,
                                        want_local, want_remote));
          }
        }
      }
      std::vector<float> v(100000, 1.0f);
      if (Status s = (*comm)->allreduce(v.data(), v.data(), v.size(), DataType::kF32, ReduceOp::kSum); !s) {
        return complain(s.to_string());
      }
      return v[99999] == static_cast<float>(n) ? 0 : complain("allreduce on planned routes is wrong");
    });
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    std::vector<int> rc;
    for (size_t r = 0; r < static_cast<size_t>(n); ++r) rc.push_back(kids.wait(r, deadline));
    if (std::count(rc.begin(), rc.end(), 42) > 0) continue;  // port taken: another base
    for (size_t r = 0; r < rc.size(); ++r) EXPECT_EQ(rc[r], 0) << "rank " << r;
    return;
  }
  GTEST_SKIP() << "three random port bases were all partly in use on this host";
}

// Every survivor loops on AllReduce until it fails; exit 0 when the error
// names the victim, 1 when it names someone else, 3 when nothing failed.
int until_failure(Communicator& comm, std::vector<float>& v, const CollectiveOptions& o, int victim) {
  const auto stop = Clock::now() + 60s;
  while (Clock::now() < stop) {
    Status s = comm.allreduce(v.data(), v.data(), v.size(), DataType::kF32, ReduceOp::kSum, o);
    if (!s) {
      const bool names = std::regex_search(s.message(), std::regex("rank " + std::to_string(victim) + "\\b"));
      if (!names) std::fprintf(stderr, "rank %d: %s\n", comm.rank(), s.to_string().c_str());
      return names ? 0 : 1;
    }
  }
  return 3;
}

// Signals the victim once the ranks are mid-AllReduce; every survivor must
// have exited 0 by the timeout + 1 s.
void expect_survivors_name(Children& kids, int n, int victim, int sig, std::chrono::milliseconds timeout) {
  std::this_thread::sleep_for(1500ms);  // connected and mid-AllReduce by now
  const auto lost = std::chrono::steady_clock::now();
  kids.kill_rank(static_cast<size_t>(victim), sig);
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    const int rc = kids.wait(static_cast<size_t>(r), lost + timeout + 1s);
    EXPECT_EQ(rc, 0) << "rank " << r << (rc == -1 ? " still running after timeout + 1 s" : " failed without naming the lost rank");
  }
}

class Fault : public ::testing::TestWithParam<std::tuple<std::string, int, int>> {};

TEST_P(Fault, EverySurvivorFailsWithinItsTimeoutNamingTheLostRank) {
  const auto [transport, n, sig] = GetParam();
  const auto timeout = 2s;
  const int victim = n / 2;
  Children kids;
  kids.start(n, [&, transport = transport, n = n, sig = sig](int rank) {
    auto comm = open_comm(kids.dir, rank, n, transport, timeout);
    if (!comm) return complain(comm.status().to_string());
    std::vector<float> v(1 << 20, 1.0f);
    // A stopped rank under ring: its successor waits on it and times out,
    // but the successor's own successor times out waiting on the successor
    // first or at the same moment, and names it — not the stopped rank.
    // Waits do not yet say whom the awaited rank itself waits for (known
    // gap, docs/collectives.md "Faults"); HD pins the stopped case to the
    // algorithm whose partners are the stalled rank's direct peers. A
    // killed rank is seen through EOF/pidfd by everyone under any algorithm.
    CollectiveOptions o;
    if (sig == SIGSTOP) o.algorithm = Algorithm::kHalvingDoubling;
    return until_failure(**comm, v, o, victim);
  });
  expect_survivors_name(kids, n, victim, sig, timeout);
}

INSTANTIATE_TEST_SUITE_P(Collectives, Fault,
                         ::testing::Values(std::make_tuple("tcp", 2, SIGKILL), std::make_tuple("tcp", 4, SIGKILL),
                                           std::make_tuple("tcp", 8, SIGKILL), std::make_tuple("shm", 3, SIGKILL),
                                           std::make_tuple("shm", 4, SIGKILL), std::make_tuple("tcp", 3, SIGSTOP),
                                           std::make_tuple("shm", 3, SIGSTOP)),
                         [](const auto& p) {
                           return std::get<0>(p.param) + "_" + std::to_string(std::get<1>(p.param)) + "ranks_" +
                                  (std::get<2>(p.param) == SIGKILL ? "killed" : "stopped");
                         });

// A rank killed while others wait for its token (route plan with rounds,
// HD): the waits on it end like any other, naming it.
TEST(PlannedRounds, EverySurvivorNamesAKilledTokenSourceWithinItsTimeout) {
  const int n = 8;
  const auto timeout = 2s;
  const routing::RoutePlan plan = rounds_plan(n, 4, 3, 5);
  auto gates = routing::plan_gates(plan);
  ASSERT_TRUE(gates && !gates->empty());
  const int victim = gates->front().from;  // a token source some rank waits for every call
  Children kids;
  kids.start(n, [&](int rank) {
    auto comm = open_comm(kids.dir, rank, n, "tcp", timeout, [&](CommConfig& c) { c.plan = plan; });
    if (!comm) return complain(comm.status().to_string());
    std::vector<float> v(1 << 16, 1.0f);
    CollectiveOptions o;
    o.algorithm = Algorithm::kHalvingDoubling;
    return until_failure(**comm, v, o, victim);
  });
  expect_survivors_name(kids, n, victim, SIGKILL, timeout);
}

}  // namespace
}  // namespace weft::coll::testing
