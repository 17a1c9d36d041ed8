// Plan epochs (docs/collectives-routes.md "Plan epochs"): ranks that see a
// new epoch at different moments switch at the same call, reconnect the TCP
// flows whose planned source port changed (getsockname shows the new plan's
// ports), keep every result exact, and go back (A -> B -> A); bad epochs are
// refused, counted, and change nothing.
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "epoch_files.h"
#include "harness.h"
#include "plan_epochs.h"
#include "tcp/tcp_transport.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

struct Switch {
  int rank;
  uint64_t epoch;
  uint64_t call;
};

// "": every TCP connection of `comm` uses `plan`'s ports (getsockname and
// getpeername); else the first that does not. Peers over shm have none.
std::string ports_differ(Communicator& comm, const routing::RoutePlan& plan) {
  const int me = comm.rank();
  for (int p = 0; p < comm.size(); ++p) {
    if (p == me) continue;
    auto* info = dynamic_cast<tcp::TcpTransportInfo*>(comm.transport_for(p));
    if (info == nullptr) continue;  // shm: a peer on this host
    for (const auto& c : info->connection_ports(p)) {
      const auto* f = c.outgoing ? plan.find(me, p) : plan.find(p, me);
      const uint16_t local = c.outgoing ? f->sport : f->dport, remote = c.outgoing ? f->dport : f->sport;
      if (c.local_port != local || c.remote_port != remote) {
        return fmt::format("rank {} {} connection with rank {}: ports {} -> {}, planned {} -> {}", me,
                           c.outgoing ? "outgoing" : "incoming", p, c.local_port, c.remote_port, local, remote);
      }
    }
  }
  return "";
}

// Epoch 1 moves every flow, epoch 2 goes back to the first plan; each
// reaches rank 1 `late` after the others.
// `transport` "auto": two ranks per host, shm between them.
void switch_twice(int n, const std::string& collective, std::chrono::milliseconds late,
                  std::chrono::milliseconds timeout, const std::string& transport = "tcp") {
  const size_t nn = static_cast<size_t>(n);
  const TwoPlans plans = two_tcp_plans(n, collective);
  if (!plans.ok()) GTEST_SKIP() << "not enough free TCP ports on 127.0.0.1";
  const routing::RoutePlan& plan_a = plans.a;
  const routing::RoutePlan& plan_b = plans.b;
  const routing::RoutePlan* by_epoch[] = {&plan_a, &plan_b, &plan_a};
  const Algorithm algorithm = collective == "allreduce-hd" ? Algorithm::kHalvingDoubling : Algorithm::kRing;
  EpochDir dir;
  std::mutex mu;
  std::vector<Switch> switches;
  std::vector<std::atomic<uint64_t>> seen(nn), calls(nn);
  std::atomic<bool> stop{false};

  std::thread watcher([&] {
    const auto deadline = Clock::now() + 20s;
    const auto all = [&](auto pred) {
      while (!stop && Clock::now() < deadline) {
        bool ok = true;
        for (size_t r = 0; r < nn; ++r) ok = ok && pred(r);
        if (ok) return true;
        std::this_thread::sleep_for(2ms);
      }
      return false;
    };
    if (!all([&](size_t r) { return calls[r] >= 3; })) return;
    for (uint64_t epoch : {1u, 2u}) {
      const std::string text = epoch_json("epoch-test", epoch, *by_epoch[epoch]);
      for (int r = 0; r < n; ++r) {
        if (r != 1) {
          ASSERT_TRUE(publish(dir.file(r), text));
        }
      }
      std::this_thread::sleep_for(late);
      ASSERT_TRUE(publish(dir.file(1), text));
      if (!all([&](size_t r) { return seen[r] >= epoch; })) return;
    }
  });

  const std::vector<size_t> counts = {1, 7, 1023, 4099, 65537};
  run_ranks(
      n,
      [&](Communicator& comm) {
        const int me = comm.rank();
        const auto start = Clock::now();
        uint64_t epoch = 0;
        int after = 0;
        for (uint64_t i = 0;; ++i) {
          const size_t count = counts[i % counts.size()];
          std::vector<int32_t> v(count);
          for (size_t j = 0; j < count; ++j) v[j] = me * 131 + static_cast<int32_t>(i * 7 + j % 97);
          CollectiveOptions o;
          o.algorithm = i % 4 == 3 ? Algorithm::kButterfly : algorithm;
          Status s = comm.allreduce(v.data(), v.data(), count, DataType::kI32, ReduceOp::kSum, o);
          ASSERT_TRUE(s) << s.to_string();
          for (size_t j = 0; j < count; ++j) {
            const int32_t want = 131 * n * (n - 1) / 2 + n * static_cast<int32_t>(i * 7 + j % 97);
            ASSERT_EQ(v[j], want) << "rank " << me << " call " << i << " element " << j << " of " << count;
          }
          if (i % 5 == 4) {  // the other calls count as calls too
            std::vector<int32_t> all(nn * 3), mine = {me, me + 1, me + 2};
            ASSERT_TRUE(comm.allgather(mine.data(), all.data(), 3, DataType::kI32));
            for (size_t k = 0; k < all.size(); ++k) ASSERT_EQ(all[k], static_cast<int32_t>(k / 3 + k % 3));
          }
          ++calls[static_cast<size_t>(me)];
          if (comm.plan_epoch() != epoch) {
            epoch = comm.plan_epoch();
            ASSERT_LE(epoch, 2u);
            EXPECT_EQ(ports_differ(comm, *by_epoch[epoch]), "") << "epoch " << epoch;
            EXPECT_EQ(*comm.route_plan(), *by_epoch[epoch]);
            seen[static_cast<size_t>(me)] = epoch;
          }
          // Every rank switches at the same call, so every rank stops at the same one.
          if (epoch == 2 && ++after >= 8) break;
          if (Clock::now() - start > 25s) {
            ADD_FAILURE() << "rank " << me << " still at epoch " << epoch << " after " << i << " calls";
            break;
          }
        }
        const PlanEpochCounters c = comm.plan_epoch_counters();
        EXPECT_EQ(c.epoch, 2u);
        EXPECT_EQ(c.switches, 2u);
        EXPECT_EQ(c.refused(), 0u);
        EXPECT_GT(c.agreements, 0u);
      },
      [&](CommConfig& c) {
        c.transport = transport;
        if (transport == "auto") c.host = host_name(c.rank / 2);
        c.plan = plan_a;
        c.plan_epochs = dir.file(c.rank);
        c.job = "epoch-test";
        c.plan_poll = 10ms;
        c.timeout = timeout;
        c.trace = [&](int rank, const TraceEvent& e) {
          if (e.kind != TraceEvent::kEpoch) return;
          std::lock_guard<std::mutex> l(mu);
          switches.push_back({rank, e.epoch, e.call});
        };
      });
  stop = true;
  watcher.join();
  for (uint64_t epoch : {1u, 2u}) {
    std::vector<Switch> at;
    for (const Switch& s : switches) {
      if (s.epoch == epoch) at.push_back(s);
    }
    ASSERT_EQ(at.size(), nn) << "ranks that switched to epoch " << epoch;
    for (const Switch& s : at) {
      EXPECT_EQ(s.call, at[0].call) << "rank " << s.rank << " switched to epoch " << epoch << " at call " << s.call
                                    << ", rank " << at[0].rank << " at call " << at[0].call;
    }
  }
}

class EpochSwitch : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

// Rank 1 sees each epoch 300 ms after the others: it waits for it inside
// the agreement (up to a quarter of the 10 s timeout, at most 1 s).
TEST_P(EpochSwitch, EveryRankSwitchesAtTheSameCallWithExactResultsOnTheNewPorts) {
  const auto [n, collective] = GetParam();
  switch_twice(n, collective, 300ms, 10s);
}

// Rank 1 sees each epoch 1.2 s after the others, more than it waits inside
// an agreement (a quarter of the 2 s timeout): no rank switches then, and
// all do at a later agreement.
TEST(EpochSwitchLate, ARankLaterThanTheAgreementWaitsStillSwitchesWithTheOthers) {
  switch_twice(3, "allreduce-hd", 1200ms, 2s);
}

// Two hosts of two ranks: TCP between them moves, shm on a host has no
// routes; both keep every result exact.
TEST(EpochSwitchAuto, TcpBetweenHostsMovesAndShmOnAHostCarriesOn) {
  switch_twice(4, "allreduce-hd", 100ms, 10s, "auto");
}

INSTANTIATE_TEST_SUITE_P(PlanEpochs, EpochSwitch,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values("allreduce-hd", "allreduce-ring")),
                         [](const auto& p) {
                           return fmt::format("{}ranks_{}", std::get<0>(p.param),
                                              std::get<1>(p.param) == "allreduce-hd" ? "hd" : "ring");
                         });

// The watcher publishes epoch 2 before every rank read epoch 1, and one
// rank only ever sees epoch 2: the ranks never agree on 1, and all switch
// to 2 at one call, skipping 1.
TEST(EpochSwitchSkip, ARankThatOnlySeesANewerEpochTakesEveryRankThere) {
  const int n = 3;
  const std::vector<uint16_t> ports = free_ports(3 + 3 * 9);
  if (ports.size() < 3 + 3 * 9) GTEST_SKIP() << "not enough free TCP ports on 127.0.0.1";
  const std::vector<uint16_t> dports(ports.begin(), ports.begin() + 3);
  std::vector<routing::RoutePlan> plans;
  for (size_t k = 0; k < 3; ++k) {
    const auto at = ports.begin() + 3 + 9 * static_cast<std::ptrdiff_t>(k);
    plans.push_back(tcp_plan(n, "allreduce-hd", dports, std::vector<uint16_t>(at, at + 9)));
  }
  EpochDir dir;
  std::mutex mu;
  std::vector<Switch> switches;
  std::vector<std::atomic<int>> calls(static_cast<size_t>(n));
  std::thread watcher([&] {
    const auto deadline = Clock::now() + 20s;
    for (auto& c : calls) {
      while (c < 3 && Clock::now() < deadline) std::this_thread::sleep_for(2ms);
    }
    EXPECT_TRUE(publish(dir.file(0), epoch_json("skip", 1, plans[1])));
    EXPECT_TRUE(publish(dir.file(2), epoch_json("skip", 1, plans[1])));
    std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(publish(dir.file(1), epoch_json("skip", 2, plans[2])));
    std::this_thread::sleep_for(600ms);
    EXPECT_TRUE(publish(dir.file(0), epoch_json("skip", 2, plans[2])));
    EXPECT_TRUE(publish(dir.file(2), epoch_json("skip", 2, plans[2])));
  });
  run_ranks(
      n,
      [&](Communicator& comm) {
        const int me = comm.rank();
        int after = 0;
        const auto start = Clock::now();
        for (int64_t i = 0; after < 5; ++i) {
          std::vector<int64_t> v(1023, me + i);
          ASSERT_TRUE(comm.allreduce(v.data(), v.data(), v.size(), DataType::kI64, ReduceOp::kSum));
          ASSERT_EQ(v[1022], n * (n - 1) / 2 + n * i);
          ++calls[static_cast<size_t>(me)];
          ASSERT_NE(comm.plan_epoch(), 1u) << "rank " << me << " ran epoch 1";
          if (comm.plan_epoch() == 2) ++after;
          std::this_thread::sleep_for(1ms);
          ASSERT_LT(Clock::now() - start, 20s) << "rank " << me << " never switched";
        }
        EXPECT_EQ(ports_differ(comm, plans[2]), "");
        EXPECT_EQ(comm.plan_epoch_counters().switches, 1u);
      },
      [&](CommConfig& c) {
        c.transport = "tcp";
        c.plan = plans[0];
        c.plan_epochs = dir.file(c.rank);
        c.job = "skip";
        c.plan_poll = 10ms;
        c.timeout = 2s;  // a rank behind waits 0.5 s for the newest epoch
        c.trace = [&](int rank, const TraceEvent& e) {
          if (e.kind != TraceEvent::kEpoch) return;
          std::lock_guard<std::mutex> l(mu);
          switches.push_back({rank, e.epoch, e.call});
        };
      });
  watcher.join();
  ASSERT_EQ(switches.size(), static_cast<size_t>(n));
  for (const Switch& s : switches) {
    EXPECT_EQ(s.epoch, 2u) << "rank " << s.rank;
    EXPECT_EQ(s.call, switches[0].call) << "rank " << s.rank;
  }
}

// The connections by (peer, outgoing): their SO_COOKIE.
std::map<std::pair<int, bool>, uint64_t> cookies(Communicator& comm) {
  std::map<std::pair<int, bool>, uint64_t> out;
  for (int p = 0; p < comm.size(); ++p) {
    auto* info = p == comm.rank() ? nullptr : dynamic_cast<tcp::TcpTransportInfo*>(comm.transport_for(p));
    if (info == nullptr) continue;
    for (const auto& c : info->connection_ports(p)) out[{p, c.outgoing}] = c.cookie;
  }
  return out;
}

TEST(EpochSwitchConnections, OnlyTheConnectionsWhoseSourcePortChangedAreMadeAgain) {
  const int n = 4;
  const std::vector<uint16_t> ports = free_ports(n + n * n + 2);
  if (ports.size() < static_cast<size_t>(n + n * n + 2)) GTEST_SKIP() << "not enough free TCP ports on 127.0.0.1";
  const std::vector<uint16_t> dports(ports.begin(), ports.begin() + n);
  std::vector<uint16_t> sports(ports.begin() + n, ports.begin() + n + n * n);
  const routing::RoutePlan plan_a = tcp_plan(n, "allreduce-hd", dports, sports);
  sports[0 * n + 1] = ports[static_cast<size_t>(n + n * n)];      // flow 0 -> 1
  sports[3 * n + 2] = ports[static_cast<size_t>(n + n * n + 1)];  // flow 3 -> 2
  const routing::RoutePlan plan_b = tcp_plan(n, "allreduce-hd", dports, sports);
  const auto moved = [](int src, int dst) { return (src == 0 && dst == 1) || (src == 3 && dst == 2); };
  EpochDir dir;
  const std::string path = dir.path + "/epochs.json";  // one file for every rank
  std::vector<std::atomic<int>> calls(static_cast<size_t>(n));
  std::thread watcher([&] {
    const auto deadline = Clock::now() + 20s;
    for (auto& c : calls) {
      while (c < 3 && Clock::now() < deadline) std::this_thread::sleep_for(2ms);
    }
    EXPECT_TRUE(publish(path, epoch_json("conns", 1, plan_b)));
  });
  run_ranks(
      n,
      [&](Communicator& comm) {
        const int me = comm.rank();
        std::map<std::pair<int, bool>, uint64_t> before;
        int after = 0;
        const auto start = Clock::now();
        for (int64_t i = 0; after < 5; ++i) {
          std::vector<int64_t> v(4099, me + i);
          CollectiveOptions o;
          o.algorithm = Algorithm::kHalvingDoubling;
          ASSERT_TRUE(comm.allreduce(v.data(), v.data(), v.size(), DataType::kI64, ReduceOp::kSum, o));
          ASSERT_EQ(v[4098], n * (n - 1) / 2 + n * i);
          if (i == 0) before = cookies(comm);
          ++calls[static_cast<size_t>(me)];
          if (comm.plan_epoch() == 1) ++after;
          std::this_thread::sleep_for(1ms);
          ASSERT_LT(Clock::now() - start, 20s) << "rank " << me << " never switched";
        }
        EXPECT_EQ(ports_differ(comm, plan_b), "");
        const auto now = cookies(comm);
        ASSERT_EQ(now.size(), before.size());
        for (const auto& [key, cookie] : before) {
          const auto [peer, outgoing] = key;
          const bool again = outgoing ? moved(me, peer) : moved(peer, me);
          EXPECT_EQ(now.at(key) != cookie, again)
              << "rank " << me << (outgoing ? " to " : " from ") << "rank " << peer
              << (again ? ": the flow moved, its connection must be new" : ": the flow stayed, so must its connection");
        }
      },
      [&](CommConfig& c) {
        c.transport = "tcp";
        c.plan = plan_a;
        c.plan_epochs = path;
        c.job = "conns";
        c.plan_poll = 10ms;
        c.timeout = 10s;
      });
  watcher.join();
}

}  // namespace
}  // namespace weft::coll::testing
