// The verbs transport behind the communicator, on soft-RoCE in the VM:
//  - the route plan's UDP source ports are what the QPs put on the wire, in
//    both directions (libpcap on the veth end under the first device);
//  - a rank killed mid-AllReduce: every survivor fails within its timeout
//    with an error naming the lost rank;
//  - a QP in the error state: the call fails naming the peer and the
//    ibv_wc_status of the completion; the peer learns that this rank gave up.
// Ranks alternate between the two devices (rank r on device r % 2).
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>
#include <thread>

#include "../collectives/harness.h"
#include "../collectives/processes.h"
#include "roce_capture.h"
#include "verbs_env.h"
#include "weft/verbs/verbs_transport.h"

namespace weft::verbs::testing {
namespace {

using namespace std::chrono_literals;
using coll::testing::run_ranks;

void use_verbs(coll::CommConfig& c, const VerbsEnv& env) {
  c.transport = "verbs";
  c.verbs.devices = {env.dev_a, env.dev_b};
  c.verbs.spin_polls = 64;  // several ranks share the VM's 2 vCPUs
}

// Awkward ports over the whole expressible range 49153..65535, distinct per
// directed pair: both QPs of a pair have their own.
routing::RoutePlan udp_plan(int n) {
  routing::RoutePlan plan;
  plan.collective = "allreduce-hd";
  plan.ranks = n;
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      routing::PlanFlow f;
      f.src_rank = s;
      f.dst_rank = d;
      f.protocol = "udp";
      f.sport = static_cast<std::uint16_t>(49153 + (s * 7919 + d * 104729) % 16383);
      f.dport = 4791;
      plan.flows.push_back(f);
    }
  }
  return plan;
}

class PlannedPorts : public ::testing::TestWithParam<int> {};

TEST_P(PlannedPorts, EveryQpOfTheTransportCarriesThePlannedSourcePortInBothDirections) {
  WEFT_REQUIRE_VERBS_ENV(env);
  const int n = GetParam();
  const routing::RoutePlan plan = udp_plan(n);
  auto dev = Device::open(device_named(env.dev_a));
  ASSERT_TRUE(dev.is_ok()) << dev.status().message();
  RoceCapture cap;
  Status started = cap.start(dev->gid().netdev);
  ASSERT_TRUE(started.is_ok()) << started.message();

  std::mutex mu;
  std::vector<QpRoute> routes;  // every QP of every rank
  run_ranks(
      n,
      [&](coll::Communicator& comm) {
        std::vector<float> v(30011, static_cast<float>(comm.rank() + 1));
        for (coll::Algorithm a : {coll::Algorithm::kHalvingDoubling, coll::Algorithm::kRing}) {
          coll::CollectiveOptions o;
          o.algorithm = a;
          Status s = comm.allreduce(v.data(), v.data(), v.size(), coll::DataType::kF32, coll::ReduceOp::kMax, o);
          ASSERT_TRUE(s) << s.to_string();
          ASSERT_EQ(v[30010], static_cast<float>(n));
        }
        std::lock_guard<std::mutex> l(mu);
        for (int p = 0; p < n; ++p) {
          auto* info = dynamic_cast<VerbsTransportInfo*>(comm.transport_for(p));
          if (info == nullptr) continue;
          for (const QpRoute& r : info->qp_routes()) {
            if (r.peer == p) routes.push_back(r);
          }
        }
      },
      [&](coll::CommConfig& c) {
        use_verbs(c, env);
        c.plan = plan;
      });
  std::this_thread::sleep_for(300ms);  // the last ACKs
  const std::vector<RocePacket> seen = cap.stop();
  ASSERT_EQ(routes.size(), static_cast<size_t>(n * (n - 1)));

  // A packet to QP q (at q's address) was sent by q's peer QP: its source
  // port must be the plan of the direction that QP serves.
  struct Expect {
    std::uint16_t sport;
    std::string who;
    int packets = 0;
  };
  std::map<std::pair<std::string, std::uint32_t>, Expect> expect;
  int loopback_qps = 0;
  for (const QpRoute& r : routes) {
    ASSERT_NE(r.planned_sport, 0);
    if (r.local_ip == r.remote_ip) {
      ++loopback_qps;  // same device: rxe delivers it internally, nothing reaches a net device
      continue;
    }
    expect[{r.remote_ip, r.remote_qpn}] = Expect{r.planned_sport, "QP " + std::to_string(r.qpn) + " towards rank " +
                                                                     std::to_string(r.peer)};
  }
  int unknown = 0;
  for (const RocePacket& p : seen) {
    auto it = expect.find({p.dst_ip, p.dest_qpn});
    if (it == expect.end()) {
      ++unknown;
      continue;
    }
    EXPECT_EQ(p.sport, it->second.sport) << "packet from " << it->second.who << " to " << p.dst_ip;
    ++it->second.packets;
  }
  EXPECT_EQ(unknown, 0) << "packets to QPs this test did not create";
  for (const auto& [key, e] : expect) {
    EXPECT_GT(e.packets, 0) << e.who << " (planned port " << e.sport << ") sent nothing on the wire";
  }
  std::printf("%d ranks: %zu cross-device QPs, %zu packets, every one on its planned source port; "
              "%d same-device QPs looped back inside rxe\n",
              n, expect.size(), seen.size(), loopback_qps);
  for (const QpRoute& r : routes) {
    if (r.local_ip == r.remote_ip) continue;
    const auto& e = expect.at({r.remote_ip, r.remote_qpn});
    std::printf("  %s (%s -> %s): planned %u, %d packets\n", e.who.c_str(), r.local_ip.c_str(), r.remote_ip.c_str(),
                e.sport, e.packets);
  }
}
INSTANTIATE_TEST_SUITE_P(Ranks, PlannedPorts, ::testing::Values(2, 4),
                         [](const auto& p) { return std::to_string(p.param) + "ranks"; });

TEST(QpError, TheCallFailsNamingThePeerAndTheCompletionStatus) {
  WEFT_REQUIRE_VERBS_ENV(env);
  std::string err0, err1;
  run_ranks(
      2,
      [&](coll::Communicator& comm) {
        std::vector<std::int32_t> v(1000, 1);
        ASSERT_TRUE(comm.allreduce(v.data(), v.data(), v.size(), coll::DataType::kI32, coll::ReduceOp::kSum));
        if (comm.rank() == 0) {
          auto* info = dynamic_cast<VerbsTransportInfo*>(comm.transport_for(1));
          ASSERT_NE(info, nullptr);
          ASSERT_TRUE(info->inject_qp_error(1).is_ok());
        }
        Status s = comm.allreduce(v.data(), v.data(), v.size(), coll::DataType::kI32, coll::ReduceOp::kSum);
        ASSERT_FALSE(s.is_ok()) << "rank " << comm.rank();
        (comm.rank() == 0 ? err0 : err1) = s.message();
      },
      [&](coll::CommConfig& c) {
        use_verbs(c, env);
        c.timeout = 20s;
      });
  EXPECT_NE(err0.find("IBV_WC_WR_FLUSH_ERR"), std::string::npos) << err0;
  // Only flushes on rank 0's side: the error says so and where to look next.
  EXPECT_NE(err0.find("nothing on this side said why: see rank 1's error"), std::string::npos) << err0;
  EXPECT_TRUE(std::regex_search(err0, std::regex("rank 1\\b"))) << err0;
  EXPECT_TRUE(std::regex_search(err1, std::regex("rank 0\\b"))) << err1;
  std::printf("rank 0: %s\nrank 1: %s\n", err0.c_str(), err1.c_str());
}

// Every survivor loops on AllReduce until it fails: exit 0 when the error
// names the victim, 1 when it names someone else, 3 when nothing failed.
class PeerKilled : public ::testing::TestWithParam<int> {};

TEST_P(PeerKilled, EverySurvivorFailsWithinItsTimeoutNamingTheLostRank) {
  WEFT_REQUIRE_VERBS_ENV(env);
  const int n = GetParam();
  const int victim = n / 2;
  const auto timeout = 10s;
  coll::testing::Children kids;
  kids.start(n, [&](int rank) {
    auto store = coll::open_store("file:" + kids.dir, rank, coll::Clock::now() + 60s);
    if (!store) return 2;
    coll::CommConfig cfg;
    cfg.rank = rank;
    cfg.size = n;
    cfg.timeout = timeout;
    use_verbs(cfg, env);
    auto comm = coll::Communicator::create(cfg, **store);
    if (!comm) {
      std::fprintf(stderr, "rank %d: %s\n", rank, comm.status().to_string().c_str());
      return 2;
    }
    // Tell the parent this rank is connected.
    std::FILE* f = std::fopen((kids.dir + "/up." + std::to_string(rank)).c_str(), "w");
    if (f != nullptr) std::fclose(f);
    std::vector<float> v(1 << 16, 1.0f);
    const auto stop = coll::Clock::now() + 120s;
    while (coll::Clock::now() < stop) {
      Status s = (*comm)->allreduce(v.data(), v.data(), v.size(), coll::DataType::kF32, coll::ReduceOp::kMax);
      if (!s) {
        const bool names = std::regex_search(s.message(), std::regex("rank " + std::to_string(victim) + "\\b"));
        std::fprintf(stderr, "rank %d: %s\n", rank, s.to_string().c_str());
        return names ? 0 : 1;
      }
    }
    return 3;
  });
  // Wait until every rank is connected and looping, then kill the victim.
  const auto up_by = std::chrono::steady_clock::now() + 90s;
  for (int r = 0; r < n; ++r) {
    while (!std::filesystem::exists(kids.dir + "/up." + std::to_string(r))) {
      ASSERT_LT(std::chrono::steady_clock::now(), up_by) << "rank " << r << " never connected";
      std::this_thread::sleep_for(20ms);
    }
  }
  std::this_thread::sleep_for(500ms);
  const auto lost = std::chrono::steady_clock::now();
  kids.kill_rank(static_cast<size_t>(victim), SIGKILL);
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    const int rc = kids.wait(static_cast<size_t>(r), lost + timeout + 5s);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - lost);
    EXPECT_EQ(rc, 0) << "rank " << r
                     << (rc == -1 ? " still running after the timeout + 5 s" : " failed without naming the lost rank");
    EXPECT_LT(ms, timeout) << "rank " << r << " learnt of the loss only at its timeout";
    std::printf("rank %d: done %lld ms after rank %d was killed (timeout %lld ms)\n", r,
                static_cast<long long>(ms.count()), victim,
                static_cast<long long>(std::chrono::milliseconds(timeout).count()));
  }
}
INSTANTIATE_TEST_SUITE_P(Ranks, PeerKilled, ::testing::Values(2, 3, 5),
                         [](const auto& p) { return std::to_string(p.param) + "ranks"; });

}  // namespace
}  // namespace weft::verbs::testing
