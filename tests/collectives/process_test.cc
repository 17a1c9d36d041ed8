// Ranks as real processes over TCP and shared memory: a smaller correctness
// matrix, the planned source ports (getsockname/getpeername on both ends),
// and faults (a rank killed or stopped mid-AllReduce).
#include <fmt/format.h>

#include <fstream>
#include <random>
#include <regex>

#include "epoch_files.h"
#include "fault_calls.h"
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
    for (Algorithm a : {Algorithm::kHalvingDoubling, Algorithm::kRing, Algorithm::kButterfly, Algorithm::kOneShot}) {
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
  std::vector<uint16_t> dports, sports(static_cast<size_t>(n * n));
  for (int d = 0; d < n; ++d) dports.push_back(static_cast<uint16_t>(base + 1000 + d));
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) sports[static_cast<size_t>(s * n + d)] = static_cast<uint16_t>(base + 1 + 16 * s + d);
  }
  return tcp_plan(n, "allreduce-hd", dports, sports);
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

// TcpOptions::congestion_control on the connections that carry a rank's
// data: Reno to ranks on this host under "auto", the host's default with "",
// the named algorithm otherwise.
std::string host_default_congestion_control() {
  std::ifstream f("/proc/sys/net/ipv4/tcp_congestion_control");
  std::string name;
  f >> name;
  return name;
}

class CongestionControl : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(CongestionControl, DataConnectionsToThisHostUseTheChosenAlgorithm) {
  const auto [option, expected] = GetParam();
  const std::string want = expected.empty() ? host_default_congestion_control() : expected;
  if (want.empty()) GTEST_SKIP() << "/proc/sys/net/ipv4/tcp_congestion_control is not readable";
  const int n = 3;
  Children kids;
  kids.start(n, [&, option = option](int rank) {
    auto comm = open_comm(kids.dir, rank, n, "tcp", 20s, [&](CommConfig& c) { c.tcp.congestion_control = option; });
    if (!comm) return complain(comm.status().to_string());
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      auto* info = dynamic_cast<tcp::TcpTransportInfo*>((*comm)->transport_for(p));
      if (!info) return complain("not a TCP transport");
      for (const auto& c : info->connection_ports(p)) {
        if (c.outgoing && c.congestion_control != want) {
          return complain(fmt::format("rank {} -> {}: congestion control '{}' with option '{}', want '{}'", rank, p,
                                      c.congestion_control, option, want));
        }
      }
    }
    std::vector<float> v(1 << 18, 1.0f);
    if (Status s = (*comm)->allreduce(v.data(), v.data(), v.size(), DataType::kF32, ReduceOp::kSum); !s) {
      return complain(s.to_string());
    }
    return v.back() == static_cast<float>(n) ? 0 : complain("allreduce is wrong");
  });
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (size_t r = 0; r < static_cast<size_t>(n); ++r) EXPECT_EQ(kids.wait(r, deadline), 0) << "rank " << r;
}

// "" in the expectation = the host's default.
INSTANTIATE_TEST_SUITE_P(Tcp, CongestionControl,
                         ::testing::Values(std::make_tuple("auto", "reno"), std::make_tuple("", ""),
                                           std::make_tuple("reno", "reno")),
                         [](const auto& p) { return std::get<0>(p.param).empty() ? std::string("host_default") : std::get<0>(p.param); });

// The first rank to connect fails naming the algorithm; a rank whose peer
// already gave up may fail to connect instead. No rank may succeed.
TEST(CongestionControlSetup, AnAlgorithmTheKernelLacksFailsSetupNamingIt) {
  const int n = 2;
  Children kids;
  kids.start(n, [&](int rank) {
    auto comm = open_comm(kids.dir, rank, n, "tcp", 3s, [&](CommConfig& c) { c.tcp.congestion_control = "nosuchcc"; });
    if (comm) return complain("setup succeeded with congestion control 'nosuchcc'");
    return comm.status().message().find("TCP_CONGESTION nosuchcc") != std::string::npos ? 0 : 7;
  });
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  std::vector<int> rc;
  for (size_t r = 0; r < static_cast<size_t>(n); ++r) rc.push_back(kids.wait(r, deadline));
  for (size_t r = 0; r < rc.size(); ++r) EXPECT_TRUE(rc[r] == 0 || rc[r] == 7) << "rank " << r << " exit " << rc[r];
  EXPECT_GE(std::count(rc.begin(), rc.end(), 0), 1) << "no rank named the algorithm";
}

TEST(CongestionControlSetup, ANameWithCharactersNoAlgorithmHasIsRejected) {
  for (const char* bad : {"BBR", "re no", "cubic!", "a_name_of_16chrs"}) {
    TransportConfig c;
    c.tcp.congestion_control = bad;
    const Status s = c.validate();
    EXPECT_FALSE(s) << bad;
    EXPECT_NE(s.message().find("congestion_control"), std::string::npos) << s.message();
  }
  TransportConfig ok;
  for (const char* good : {"auto", "", "reno", "cubic", "dctcp", "bbr"}) {
    ok.tcp.congestion_control = good;
    EXPECT_TRUE(ok.validate()) << good;
  }
}

// Every survivor loops on the call (each with `timeout`) until it fails;
// exit 0 when the error names the victim (a stopped one as stalled) within
// the timeout + 1 s of the call's start, 1 when it names someone else or
// the first call failed, 3 when nothing failed, 4 when it took longer.
int until_failure(Communicator& comm, const std::string& kind, FaultBuffers& b, int victim, int sig,
                  const Children& kids, std::chrono::milliseconds timeout) {
  Status s = fault_call(comm, kind, b);  // connected and in step: the communicator's generous timeout
  if (!s) return complain(fmt::format("rank {}: first call: {}", comm.rank(), s.to_string()));
  kids.signal_ready();
  const auto stop = Clock::now() + 60s;
  auto start = Clock::now();
  while (s && Clock::now() < stop) {
    start = Clock::now();
    s = fault_call(comm, kind, b, timeout);
  }
  if (s) return 3;
  const auto took = Clock::now() - start;
  kids.send_result(comm.rank(), std::chrono::duration<double, std::milli>(took).count());
  const bool names = sig == SIGSTOP ? blames_stalled(s.message(), victim)
                                    : std::regex_search(s.message(), std::regex("rank " + std::to_string(victim) + "\\b"));
  if (!names || took > timeout + 1s) {
    std::fprintf(stderr, "rank %d, call of %.0f ms: %s\n", comm.rank(),
                 std::chrono::duration<double, std::milli>(took).count(), s.to_string().c_str());
  }
  return !names ? 1 : took > timeout + 1s ? 4 : 0;
}

// Signals the victim once every rank is calling. Every survivor's failing
// call must end within its timeout + 1 s, naming the victim (exit 0). A
// call that was in flight at the signal may still complete (the victim had
// sent its part), so the call that fails may start after it: each survivor
// must exit by the signal + one in-flight call + timeout + 1 s, taken here
// as the timeout + 3 s. Prints the failing calls' times.
void expect_survivors_name(Children& kids, int n, int victim, int sig, std::chrono::milliseconds timeout) {
  ASSERT_TRUE(kids.wait_ready(n, std::chrono::steady_clock::now() + 60s)) << "the ranks did not all start calling";
  std::this_thread::sleep_for(20ms);  // mid-call
  const auto lost = std::chrono::steady_clock::now();
  kids.kill_rank(static_cast<size_t>(victim), sig);
  double last_exit = 0;
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    const int rc = kids.wait(static_cast<size_t>(r), lost + timeout + 3s);
    last_exit = std::max(last_exit, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - lost).count());
    EXPECT_EQ(rc, 0) << "rank " << r
                     << (rc == -1  ? " still running 3 s after the timeout"
                         : rc == 4 ? "'s failing call took longer than its timeout + 1 s"
                                   : " failed without naming the lost rank");
  }
  double lo = 1e9, hi = 0;
  for (const auto& res : kids.read_results()) {
    lo = std::min(lo, res.ms);
    hi = std::max(hi, res.ms);
  }
  std::printf("[fault] failing calls took %.0f-%.0f ms (timeout %lld ms); last survivor exited %.0f ms after the %s\n",
              lo, hi, static_cast<long long>(timeout.count()), last_exit, sig == SIGSTOP ? "stop" : "kill");
}

struct FaultCase {
  std::string transport;  // "auto" with `hosts` > 1: shm within a host, tcp across
  int ranks;
  int sig;
  int victim;
  std::string kind;  // fault_call
  int hosts = 1;
};

class Fault : public ::testing::TestWithParam<FaultCase> {};

// A killed rank is seen at once (EOF, pidfd) by every rank; a stopped one
// only through deadlines, and the first to expire may be a rank that waits
// on another survivor: the stall resolution (collectives/stall.h) follows
// the wait chain to the stopped rank.
TEST_P(Fault, EverySurvivorFailsWithinItsTimeoutNamingTheLostRank) {
  const FaultCase c = GetParam();
  const auto timeout = 2s;
  Children kids;
  kids.start(c.ranks, [&](int rank) {
    auto comm = open_comm(kids.dir, rank, c.ranks, c.transport, 60s, [&](CommConfig& cfg) {
      if (c.hosts > 1) cfg.host = fmt::format("h{}", rank * c.hosts / c.ranks);
    });
    if (!comm) return complain(comm.status().to_string());
    FaultBuffers b(c.ranks, 1 << 16);
    return until_failure(**comm, c.kind, b, c.victim, c.sig, kids, timeout);
  });
  expect_survivors_name(kids, c.ranks, c.victim, c.sig, timeout);
}

std::vector<FaultCase> fault_cases() {
  std::vector<FaultCase> out = {
      {"tcp", 2, SIGKILL, 1, "auto"}, {"tcp", 4, SIGKILL, 2, "auto"}, {"tcp", 8, SIGKILL, 4, "auto"},
      {"shm", 3, SIGKILL, 1, "auto"}, {"shm", 4, SIGKILL, 2, "auto"},
  };
  // Stopped under ring, in the middle and at rank 0 (which often serves the
  // rendezvous store; the resolution does not use the store).
  for (const char* t : {"tcp", "shm"}) {
    for (int n : {3, 4, 5, 8}) {
      out.push_back({t, n, SIGSTOP, n / 2, "ring"});
      out.push_back({t, n, SIGSTOP, 0, "ring"});
    }
  }
  out.push_back({"tcp", 3, SIGSTOP, 1, "hd"});
  out.push_back({"shm", 5, SIGSTOP, 2, "butterfly"});
  out.push_back({"tcp", 8, SIGSTOP, 0, "butterfly"});
  out.push_back({"shm", 4, SIGSTOP, 1, "oneshot"});
  out.push_back({"tcp", 3, SIGSTOP, 0, "oneshot"});
  out.push_back({"auto", 4, SIGSTOP, 0, "hybrid", 2});
  out.push_back({"auto", 8, SIGSTOP, 5, "hybrid", 2});
  out.push_back({"tcp", 5, SIGSTOP, 2, "broadcast"});
  out.push_back({"shm", 5, SIGSTOP, 0, "allgather"});
  out.push_back({"tcp", 4, SIGSTOP, 1, "reduce_scatter"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Collectives, Fault, ::testing::ValuesIn(fault_cases()), [](const auto& p) {
  const FaultCase& c = p.param;
  return fmt::format("{}_{}ranks_{}{}_{}", c.transport, c.ranks, c.sig == SIGKILL ? "killed" : "stopped", c.victim,
                     c.kind);
});

// A rank that destroys its communicator while the others still call (the
// ranks made different calls), then lingers or exits: every other rank's
// call fails at once naming it, not after its timeout as a stalled or dead
// peer.
struct ClosedCase {
  std::string transport;
  int ranks;
  bool lingers;  // the rank stays alive after destroying its communicator
};

class ClosedPeer : public ::testing::TestWithParam<ClosedCase> {};

TEST_P(ClosedPeer, EveryOtherRankFailsAtOnceNamingTheRankThatClosed) {
  const ClosedCase c = GetParam();
  const int victim = c.ranks - 1;
  const auto timeout = 20s;
  Children kids;
  kids.start(c.ranks, [&](int rank) {
    auto comm = open_comm(kids.dir, rank, c.ranks, c.transport, 60s);
    if (!comm) return complain(comm.status().to_string());
    FaultBuffers b(c.ranks, 1 << 10);
    // Where the goodbye arrived before the call waited, TCP says so in its
    // own words ("has closed its communicator" / "its connections").
    const std::regex want(fmt::format("rank {} (has )?closed its (communicator|connections)", victim));
    if (Status s = fault_call(**comm, "auto", b); !s) {
      // The first call, which every rank makes, fails only where a faster
      // rank began the second one first, found the victim gone and told
      // everyone: its notice, relayed, names the victim. A rank that itself
      // takes the victim's goodbye for a failure in this call is wrong (the
      // victim wrote all it sent in it before closing).
      const std::regex relayed(
          fmt::format("rank ([0-9]+) gave up: .*rank {} (has )?closed its (communicator|connections)", victim));
      std::smatch m;
      const std::string msg = s.message();
      if (rank != victim && std::regex_search(msg, m, relayed) && m[1] != std::to_string(victim)) return 0;
      return complain(fmt::format("rank {}, first call: {}", rank, s.to_string()));
    }
    if (rank == victim) {
      comm->reset();
      if (c.lingers) std::this_thread::sleep_for(30s);  // killed by the test when it is done
      return 0;
    }
    const auto start = Clock::now();
    Status s = fault_call(**comm, "auto", b, timeout);
    const auto took = Clock::now() - start;
    if (s) return complain(fmt::format("rank {}: the call succeeded", rank));
    if (!std::regex_search(s.message(), want) || took > 5s) {
      return complain(fmt::format("rank {}, call of {} ms: {}", rank,
                                  std::chrono::duration_cast<std::chrono::milliseconds>(took).count(), s.to_string()));
    }
    return 0;
  });
  for (int r = 0; r < c.ranks; ++r) {
    if (r == victim && c.lingers) continue;
    EXPECT_EQ(kids.wait(static_cast<size_t>(r), std::chrono::steady_clock::now() + 15s), 0) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Collectives, ClosedPeer,
                         ::testing::Values(ClosedCase{"shm", 3, true}, ClosedCase{"shm", 4, false},
                                           ClosedCase{"tcp", 3, true}, ClosedCase{"tcp", 4, false}),
                         [](const auto& p) {
                           return fmt::format("{}_{}ranks_{}", p.param.transport, p.param.ranks,
                                              p.param.lingers ? "lingers" : "exits");
                         });

// HD AllReduce on 8 ranks over tcp under a plan with rounds until `victim`
// gets `sig`: every survivor names it within its timeout + 1 s.
void rounds_fault(const routing::RoutePlan& plan, int victim, int sig) {
  const int n = plan.ranks;
  const auto timeout = 2s;
  Children kids;
  kids.start(n, [&](int rank) {
    auto comm = open_comm(kids.dir, rank, n, "tcp", 60s, [&](CommConfig& c) { c.plan = plan; });
    if (!comm) return complain(comm.status().to_string());
    FaultBuffers b(n, 1 << 16);
    return until_failure(**comm, "hd", b, victim, sig, kids, timeout);
  });
  expect_survivors_name(kids, n, victim, sig, timeout);
}

// A rank killed while others wait for its token: the waits on it end like
// any other, naming it.
TEST(PlannedRounds, EverySurvivorNamesAKilledTokenSourceWithinItsTimeout) {
  const routing::RoutePlan plan = rounds_plan(8, 4, 3, 5);
  auto gates = routing::plan_gates(plan);
  ASSERT_TRUE(gates && !gates->empty());
  rounds_fault(plan, gates->front().from, SIGKILL);  // a token source some rank waits for every call
}

// A rank stopped while the rank it sends data to owes a token to a third
// rank: the third waits on the token source, which waits on the stopped
// rank. Every survivor names the stopped one.
TEST(PlannedRounds, EverySurvivorNamesAStoppedTokenSourcesPredecessorWithinItsTimeout) {
  const routing::RoutePlan plan = rounds_plan(8, 4, 3, 5);
  auto gates = routing::plan_gates(plan);
  ASSERT_TRUE(gates && !gates->empty());
  auto sched = routing::build_schedule(routing::Collective::kAllreduceHd, plan.ranks, 1);
  ASSERT_TRUE(sched);
  int victim = -1;
  for (const routing::Gate& g : *gates) {
    // The rank whose data of after_step the token source waits for.
    for (const routing::Flow& f : sched->steps[static_cast<size_t>(g.after_step)].flows) {
      if (f.dst == g.from && f.src != g.waiter) victim = f.src;
    }
    if (victim >= 0) break;
  }
  ASSERT_GE(victim, 0) << "no gate whose token source waits on a third rank";
  rounds_fault(plan, victim, SIGSTOP);
}

}  // namespace
}  // namespace weft::coll::testing
