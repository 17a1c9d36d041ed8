// libnccl-net-weft.so driven as NCCL drives a net plugin, by 2 and 4
// processes on the VM's two rxe devices (rank r on device r % 2, so every
// ring edge crosses the veth), for each API version; and the planned UDP
// source ports of its QPs on the wire.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "../verbs/roce_capture.h"
#include "../verbs/verbs_env.h"
#include "children.h"
#include "weft/nccl_net/driver.h"
#include "ring_rank.h"
#include "weft/collectives/store.h"
#include "weft/routing/plan.h"
#include "weft/verbs/device.h"

namespace weft::nccl_net::testing {
namespace {

using verbs::testing::VerbsEnv;

struct RingCase {
  int version;
  int nranks;
  int qps;
  bool with_64mib = false;  // one more payload of 64 MiB
  bool exit_with_live_comms = false;  // RingRank's; each rank's stderr is checked
};
// Stable ctest names (the default printer shows the struct's padding bytes).
void PrintTo(const RingCase& c, std::ostream* os) {
  *os << "v" << c.version << " " << c.nranks << " ranks " << c.qps << " QPs" << (c.with_64mib ? " 64 MiB" : "");
}

// Runs the ring; the child prints its failure, the parent reports codes.
void run_ring(const VerbsEnv& env, const RingCase& rc, const std::string& plan, int planned_qps_per_rank,
              int traffic_class = -1) {
  std::vector<std::size_t> payloads = {0, 1, 4099, std::size_t{1} << 20};
  if (rc.with_64mib) payloads.push_back(std::size_t{64} << 20);
  // Named by the parent's pid, which the children share.
  const auto stderr_path = [parent = getpid()](int rank) {
    return fmt::format("/tmp/weft-nccl-exit-{}-{}.log", parent, rank);
  };
  Children kids = fork_children(rc.nranks, [&](int rank, std::uint16_t port) {
    if (port == 0) return 2;
    if (rc.exit_with_live_comms) {
      FILE* f = std::fopen(stderr_path(rank).c_str(), "w");
      if (f == nullptr || dup2(fileno(f), STDERR_FILENO) < 0) return 3;
    }
    RingRank r;
    r.version = rc.version;
    r.rank = rank;
    r.nranks = rc.nranks;
    r.device = rank % 2 == 0 ? env.dev_a : env.dev_b;
    r.qps = rc.qps;
    r.plan_path = plan;
    r.store_port = port;
    r.payloads = payloads;
    r.expect_planned_qps = planned_qps_per_rank;
    r.traffic_class = traffic_class;
    r.exit_with_live_comms = rc.exit_with_live_comms;
    std::string err = run_ring_rank(r);
    if (!err.empty()) std::fprintf(stderr, "%s\n", err.c_str());
    return err.empty() ? 0 : 1;
  });
  auto store = coll::TcpStore::open("127.0.0.1", 0, true, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  const std::uint16_t port = store ? (*store)->port() : 0;
  std::vector<int> codes = release_and_wait(kids, port, std::chrono::seconds(150));
  ASSERT_TRUE(store) << store.status().message();
  for (int i = 0; i < rc.nranks; ++i) {
    EXPECT_EQ(codes[i], 0) << "rank " << i << " (124 = timed out, 128 + n = killed by signal n)";
    if (!rc.exit_with_live_comms) continue;
    std::ifstream in(stderr_path(i));
    std::string line, all;
    while (std::getline(in, line)) {
      all += line + "\n";
      EXPECT_EQ(line.find("cleanup"), std::string::npos) << "rank " << i << ": " << line;
    }
    std::printf("rank %d's stderr:\n%s", i, all.c_str());
    std::remove(stderr_path(i).c_str());
  }
}

class Ring : public ::testing::TestWithParam<RingCase> {};

TEST_P(Ring, EveryByteOfEveryPayloadAndGroupedReceiveArrives) {
  WEFT_REQUIRE_VERBS_ENV(env);
  run_ring(env, GetParam(), "", 0);
}

// Each version with 2 ranks (one QP, and several), and 4 ranks; 64 MiB
// messages with 2 ranks (each rank sends one and receives one).
INSTANTIATE_TEST_SUITE_P(V, Ring,
                         ::testing::Values(RingCase{8, 2, 1}, RingCase{8, 4, 2}, RingCase{9, 2, 4}, RingCase{9, 4, 1},
                                           RingCase{10, 2, 2}, RingCase{10, 4, 4}, RingCase{11, 2, 1},
                                           RingCase{11, 4, 4}, RingCase{8, 2, 2, true}, RingCase{9, 2, 1, true},
                                           RingCase{10, 2, 4, true}, RingCase{11, 2, 4, true}),
                         [](const auto& p) {
                           return fmt::format("v{}_{}ranks_{}qps{}", p.param.version, p.param.nranks, p.param.qps,
                                              p.param.with_64mib ? "_64MiB" : "");
                         });


// A job that exits without ncclCommDestroy (exit(3) with every comm, memory
// handle and request open) while NCCL's proxy thread still polls a request:
// the process ends with status 0 and nothing of the plugin is torn down
// under the thread (no verbs cleanup error: the devices stay open until the
// process is gone, as NCCL's own IB transport leaves them).
TEST(ExitWithoutClosing, EndsWithStatusZeroAndTearsNothingDownUnderAPollingThread) {
  WEFT_REQUIRE_VERBS_ENV(env);
  RingCase c{11, 2, 2};
  c.exit_with_live_comms = true;
  run_ring(env, c, "", 0);
}

// Two ranks, 4 QPs per connection, a plan giving each QP its own port: every
// data packet (RDMA WRITE) of every QP leaves on its planned port, and each
// planned port carries data.
TEST(PlannedPorts, EveryDataPacketOfEveryQpLeavesOnItsPlannedPort) {
  WEFT_REQUIRE_VERBS_ENV(env);
  constexpr int kQps = 4;
  const std::string ip_a = ip_of(env.dev_a), ip_b = ip_of(env.dev_b);
  ASSERT_FALSE(ip_a.empty() || ip_b.empty());
  // Rank 0 (on a) connects to rank 1's listener and rank 1 to rank 0's: in
  // each process the first listen, so both connections are conn 0.
  routing::RoutePlan plan;
  plan.collective = "nccl-ring";
  plan.ranks = 2;
  std::map<std::string, std::set<std::uint16_t>> ports_to;  // destination address -> planned ports
  for (int q = 0; q < kQps; ++q) {
    for (int src : {0, 1}) {
      routing::PlanFlow f;
      f.src_rank = src;
      f.dst_rank = 1 - src;
      f.src_host = src == 0 ? "a" : "b";
      f.dst_host = src == 0 ? "b" : "a";
      f.src_addr = src == 0 ? ip_a : ip_b;
      f.dst_addr = src == 0 ? ip_b : ip_a;
      f.qp = q;
      f.sport = static_cast<std::uint16_t>(src == 0 ? 49153 + 4111 * q : 65535 - 3001 * q);
      f.dport = 4791;
      plan.flows.push_back(f);
      ports_to[f.dst_addr].insert(f.sport);
    }
  }
  char path[] = "/tmp/weft-nccl-plan-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_TRUE(routing::save_plan(plan, path).is_ok());

  verbs::testing::RoceCapture cap;
  auto dev = verbs::Device::open(verbs::testing::device_named(env.dev_a));
  ASSERT_TRUE(dev) << dev.status().message();
  Status started = cap.start(verbs::testing::netdev_of(*dev));
  ASSERT_TRUE(started.is_ok()) << started.message();
  run_ring(env, RingCase{11, 2, kQps}, path, kQps);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the last ACKs
  const auto seen = cap.stop();
  unlink(path);

  std::map<std::uint16_t, int> writes_by_port;
  int writes = 0;
  for (const auto& p : seen) {
    if (p.opcode < 0x06 || p.opcode > 0x0B) continue;  // RC RDMA WRITE first..only-with-immediate
    ++writes;
    EXPECT_EQ(ports_to[p.dst_ip].count(p.sport), 1u)
        << "a write to " << p.dst_ip << " QP " << p.dest_qpn << " left on unplanned port " << p.sport;
    ++writes_by_port[p.sport];
  }
  for (const auto& [addr, ports] : ports_to) {
    for (std::uint16_t port : ports) {
      EXPECT_GT(writes_by_port[port], 0) << "planned port " << port << " (to " << addr << ") carried no data";
      std::printf("to %s: planned port %u carried %d data packets\n", addr.c_str(), port, writes_by_port[port]);
    }
  }
  std::printf("%d data packets, %zu packets in all\n", writes, seen.size());
}

// NCCL's traffic class (v10: connect's config, v11: init's) on every RoCE
// packet of the connections, both ways: the connector's writes, and the
// listener's ACKs and credit SENDs, which NCCL's IB receiver also sends in
// the sender's class (else they travel best-effort, outside the lossless
// class the data is in).
class TrafficClass : public ::testing::TestWithParam<int> {};

TEST_P(TrafficClass, EveryPacketBothWaysCarriesNcclsClass) {
  WEFT_REQUIRE_VERBS_ENV(env);
  constexpr int kTc = 104;  // DSCP 26 (AF31), ECN bits 0
  verbs::testing::RoceCapture cap;
  auto dev = verbs::Device::open(verbs::testing::device_named(env.dev_a));
  ASSERT_TRUE(dev) << dev.status().message();
  Status started = cap.start(verbs::testing::netdev_of(*dev));
  ASSERT_TRUE(started.is_ok()) << started.message();
  run_ring(env, RingCase{GetParam(), 2, 2}, "", 0, kTc);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the last ACKs
  const auto seen = cap.stop();
  std::map<int, int> by_kind;  // 0 write, 1 ACK, 2 SEND
  for (const auto& p : seen) {
    const int kind = p.opcode == 0x11 ? 1 : p.opcode <= 0x05 ? 2 : p.opcode <= 0x0B ? 0 : -1;
    EXPECT_EQ(p.tos, kTc) << "opcode " << int{p.opcode} << " to " << p.dst_ip << " QP " << p.dest_qpn;
    ++by_kind[kind];
  }
  EXPECT_GT(by_kind[0], 0) << "no RDMA WRITE seen";
  EXPECT_GT(by_kind[1], 0) << "no ACK seen";
  EXPECT_GT(by_kind[2], 0) << "no credit SEND seen";
  std::printf("%d writes, %d ACKs, %d SENDs, %zu packets in all\n", by_kind[0], by_kind[1], by_kind[2], seen.size());
}

INSTANTIATE_TEST_SUITE_P(V, TrafficClass, ::testing::Values(10, 11),
                         [](const auto& p) { return fmt::format("v{}", p.param); });

}  // namespace
}  // namespace weft::nccl_net::testing
