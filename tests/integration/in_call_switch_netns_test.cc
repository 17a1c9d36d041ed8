// In-call plan switches on the emulated fabric (docs/collectives-routes.md
// "Plan epochs", "Inside a stalled call"): 4 ranks on hosts under 4 leaves
// run back-to-back verified AllReduce calls over TCP with a route plan; a
// link that a planned flow crosses is cut (a gray failure: packets dropped,
// no route changes) while they run. As the watcher would, the test publishes
// epoch 1 ~500 ms after the cut, with every flow (and its ACKs) off the cut
// link: the stalled call is abandoned and run again on it, every rank runs
// epoch 1 within 2 s of the cut, and every result is exact. After the link is
// mended, epoch 2 (the first plan) is taken at a call boundary.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "netns_fabric.h"
#include "weft/collectives/communicator.h"
#include "weft/collectives/store.h"
#include "weft/routing/plan.h"

namespace weft::test {
namespace {

using namespace std::chrono_literals;
using coll::Clock;

constexpr int kRanks = 4;
constexpr int kCandidates = 24;  // source ports tried per flow

struct Flow {
  int src, dst;
};

bool write_epoch(const std::string& path, uint64_t epoch, const routing::RoutePlan& plan) {
  {
    std::ofstream f(path + ".tmp", std::ios::trunc);
    f << fmt::format(R"({{"version": 1, "job": "netns-incall", "epoch": {}, "reason": "test", "plan": {}}})", epoch,
                     routing::plan_to_json(plan));
    if (!f) return false;
  }
  return std::rename((path + ".tmp").c_str(), path.c_str()) == 0;
}

TEST(InCallSwitchNetns, ACutLinkStallsACallThatEveryRankRunsAgainOnTheNewEpochWithin2s) {
  WEFT_SKIP_UNLESS_NETNS();
  auto fabric = NetnsFabric::create(FabricOptions::clos(2, kRanks, 1));
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  const std::vector<FabricHost>& hosts = f.hosts();
  ASSERT_EQ(hosts.size(), static_cast<size_t>(kRanks));

  // Every directed pair's candidate source ports, and the spine each takes
  // both ways (the data, and the ACKs of the reverse 5-tuple).
  std::vector<Flow> flows;
  for (int s = 0; s < kRanks; ++s) {
    for (int d = 0; d < kRanks; ++d) {
      if (s != d) flows.push_back({s, d});
    }
  }
  const auto dport = [](int rank) { return 47100 + rank; };
  const auto sport = [](size_t flow, int k) { return 41000 + static_cast<int>(flow) * kCandidates + k; };
  std::vector<FiveTuple> tuples;
  for (size_t i = 0; i < flows.size(); ++i) {
    const auto& a = hosts[static_cast<size_t>(flows[i].src)];
    const auto& b = hosts[static_cast<size_t>(flows[i].dst)];
    for (int k = 0; k < kCandidates; ++k) {
      tuples.push_back({a.ip, b.ip, 6, sport(i, k), dport(flows[i].dst)});
      tuples.push_back({b.ip, a.ip, 6, dport(flows[i].dst), sport(i, k)});
    }
  }
  auto spines = f.ground_truth(tuples);
  ASSERT_TRUE(spines) << spines.status().to_string();
  const auto spine = [&](size_t flow, int k, bool back) {
    return (*spines)[(flow * kCandidates + static_cast<size_t>(k)) * 2 + (back ? 1 : 0)];
  };
  // Plan A: each flow's first candidate. The cut: the link from the spine
  // that flow 0 -> 1 takes to rank 1's leaf.
  const int cut_spine = spine(0, 0, false), cut_leaf = hosts[1].leaf;
  ASSERT_GE(cut_spine, 1);
  const auto crosses = [&](size_t i, int k) {
    const bool touches = hosts[static_cast<size_t>(flows[i].src)].leaf == cut_leaf ||
                         hosts[static_cast<size_t>(flows[i].dst)].leaf == cut_leaf;
    return touches && (spine(i, k, false) == cut_spine || spine(i, k, true) == cut_spine);
  };
  routing::RoutePlan plan_a, plan_b;
  for (routing::RoutePlan* p : {&plan_a, &plan_b}) {
    p->collective = "allreduce-hd";
    p->topology = "netns";
    p->ranks = kRanks;
  }
  for (size_t i = 0; i < flows.size(); ++i) {
    routing::PlanFlow pf;
    pf.src_rank = flows[i].src;
    pf.dst_rank = flows[i].dst;
    pf.src_host = hosts[static_cast<size_t>(flows[i].src)].name;
    pf.dst_host = hosts[static_cast<size_t>(flows[i].dst)].name;
    pf.protocol = "tcp";
    pf.dport = static_cast<uint16_t>(dport(flows[i].dst));
    pf.sport = static_cast<uint16_t>(sport(i, 0));
    plan_a.flows.push_back(pf);
    int k = 0;
    while (k < kCandidates && crosses(i, k)) ++k;
    ASSERT_LT(k, kCandidates) << "no source port of flow " << flows[i].src << " -> " << flows[i].dst << " avoids the cut";
    pf.sport = static_cast<uint16_t>(sport(i, k));
    plan_b.flows.push_back(pf);
  }

  char tmpl[] = "/tmp/weft-incall-netns-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  const auto file = [&](int r) { return fmt::format("{}/rank{}.json", dir, r); };

  std::mutex mu;
  std::vector<Clock::time_point> on_epoch[3];
  for (auto& v : on_epoch) v.assign(kRanks, Clock::time_point{});
  std::vector<std::string> phase_one(kRanks);
  std::atomic<int> calls{0};
  // Every rank stops at the same call (a rank that stopped earlier would
  // leave the others waiting in the next one).
  std::atomic<uint64_t> stop_at{UINT64_MAX};
  std::vector<std::atomic<uint64_t>> at(kRanks);
  coll::MemoryStore store;
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      ASSERT_TRUE(enter_netns(hosts[static_cast<size_t>(r)].ns));
      coll::CommConfig c;
      c.rank = r;
      c.size = kRanks;
      c.transport = "tcp";
      c.host = hosts[static_cast<size_t>(r)].name;
      c.tcp.listen_address = hosts[static_cast<size_t>(r)].ip;
      c.timeout = 10s;
      c.plan = plan_a;
      c.plan_epochs = file(r);
      c.job = "netns-incall";
      c.plan_poll = 50ms;
      c.switch_stall = 200ms;
      c.trace = [&](int rank, const coll::TraceEvent& e) {
        if (e.kind != coll::TraceEvent::kEpoch || e.epoch > 2) return;
        std::lock_guard<std::mutex> l(mu);
        on_epoch[e.epoch][static_cast<size_t>(rank)] = Clock::now();
        if (e.epoch == 1) phase_one[static_cast<size_t>(rank)] = std::string(e.phase);
      };
      auto comm = coll::Communicator::create(c, store);
      ASSERT_TRUE(comm) << comm.status().to_string();
      const size_t count = (1u << 18) + 3;  // 1 MiB + 3 floats
      std::vector<float> v(count);
      for (uint64_t i = 0; i < stop_at; ++i) {
        at[static_cast<size_t>(r)] = i;
        for (size_t j = 0; j < count; ++j) v[j] = static_cast<float>(r * 3 + static_cast<int>((i + j) % 509));
        coll::CollectiveOptions o;
        o.algorithm = coll::Algorithm::kHalvingDoubling;
        const Status s = (*comm)->allreduce(v.data(), v.data(), count, coll::DataType::kF32, coll::ReduceOp::kSum, o);
        ASSERT_TRUE(s) << "rank " << r << " call " << i << ": " << s.to_string();
        for (size_t j = 0; j < count; ++j) {
          const float want = static_cast<float>(3 * kRanks * (kRanks - 1) / 2 + kRanks * static_cast<int>((i + j) % 509));
          ASSERT_EQ(v[j], want) << "rank " << r << " call " << i << " element " << j;
        }
        ++calls;
      }
      const coll::PlanEpochCounters pc = (*comm)->plan_epoch_counters();
      EXPECT_EQ(pc.epoch, 2u) << "rank " << r;
      EXPECT_EQ(pc.in_call_switches, 1u) << "rank " << r;
      EXPECT_EQ(pc.refused(), 0u) << "rank " << r;
    });
  }
  const auto all_on = [&](int epoch, Clock::time_point until) {
    while (Clock::now() < until) {
      {
        std::lock_guard<std::mutex> l(mu);
        bool all = true;
        for (const auto& t : on_epoch[epoch]) all = all && t != Clock::time_point{};
        if (all) return true;
      }
      std::this_thread::sleep_for(5ms);
    }
    return false;
  };
  const auto wait_calls = [&](int n) {
    const auto until = Clock::now() + 10s;
    while (calls < n && Clock::now() < until) std::this_thread::sleep_for(5ms);
    return calls >= n;
  };
  // The test goes on to the end whatever fails, so that the ranks stop.
  EXPECT_TRUE(wait_calls(4 * 10)) << "the ranks did not run 10 calls each";
  ASSERT_TRUE(f.cut_link(cut_spine, cut_leaf));
  const auto cut_at = Clock::now();
  std::this_thread::sleep_for(500ms);  // the watcher localises and re-plans
  for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(write_epoch(file(r), 1, plan_b));
  EXPECT_TRUE(all_on(1, cut_at + 5s));
  const int at_switch = calls;
  EXPECT_TRUE(wait_calls(at_switch + 4 * 10));
  EXPECT_TRUE(f.mend_link(cut_spine, cut_leaf));
  for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(write_epoch(file(r), 2, plan_a));
  EXPECT_TRUE(all_on(2, Clock::now() + 5s));
  const int at_back = calls;
  EXPECT_TRUE(wait_calls(at_back + 4 * 5));
  uint64_t last = 0;
  for (const auto& a : at) last = std::max<uint64_t>(last, a);
  stop_at = last + 5;
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r) {
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(on_epoch[1][static_cast<size_t>(r)] - cut_at);
    EXPECT_LT(took, 2s) << "rank " << r << " ran epoch 1 " << took.count() << " ms after the cut";
    std::printf("rank %d runs epoch 1 %lld ms after the cut\n", r, static_cast<long long>(took.count()));
    EXPECT_EQ(phase_one[static_cast<size_t>(r)], "plan-epoch-in-call") << "rank " << r;
  }
}

}  // namespace
}  // namespace weft::test
