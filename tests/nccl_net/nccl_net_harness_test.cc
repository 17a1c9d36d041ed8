// libnccl-net-weft.so driven as NCCL drives a net plugin, by 2 and 4
// processes on the VM's two rxe devices (rank r on device r % 2, so every
// ring edge crosses the veth), for each API version; and the planned UDP
// source ports of its QPs on the wire.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "../verbs/roce_capture.h"
#include "../verbs/verbs_env.h"
#include "plugin_driver.h"
#include "ring_rank.h"
#include "weft/collectives/store.h"
#include "weft/routing/plan.h"
#include "weft/verbs/device.h"

namespace weft::nccl_net::testing {
namespace {

using verbs::testing::VerbsEnv;

// Forks `n` children that block until the parent sends them the store's
// port, runs `child(i, port)` in child i (its return is the exit status), and
// waits up to `timeout` for them; a child still running then is killed.
struct Children {
  std::vector<pid_t> pids;
  std::vector<int> pipes;
};

Children fork_children(int n, const std::function<int(int, std::uint16_t)>& child) {
  Children c;
  for (int i = 0; i < n; ++i) {
    int fds[2];
    if (pipe(fds) != 0) std::abort();
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[1]);
      std::uint16_t port = 0;
      if (read(fds[0], &port, sizeof(port)) != sizeof(port)) _exit(3);
      std::fflush(stdout);
      _exit(child(i, port));
    }
    close(fds[0]);
    c.pids.push_back(pid);
    c.pipes.push_back(fds[1]);
  }
  return c;
}

// Releases the children (port 0 = "give up") and collects their exit codes.
std::vector<int> release_and_wait(Children& c, std::uint16_t port, std::chrono::seconds timeout) {
  for (int fd : c.pipes) {
    if (write(fd, &port, sizeof(port)) != sizeof(port)) std::perror("write");
    close(fd);
  }
  std::vector<int> codes(c.pids.size(), -1);
  const auto end = std::chrono::steady_clock::now() + timeout;
  std::size_t left = c.pids.size();
  while (left > 0) {
    for (std::size_t i = 0; i < c.pids.size(); ++i) {
      if (codes[i] != -1) continue;
      int st = 0;
      if (waitpid(c.pids[i], &st, WNOHANG) == c.pids[i]) {
        codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > end) {
      for (std::size_t i = 0; i < c.pids.size(); ++i) {
        if (codes[i] == -1) {
          kill(c.pids[i], SIGKILL);
          waitpid(c.pids[i], nullptr, 0);
          codes[i] = 124;
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return codes;
}

struct RingCase {
  int version;
  int nranks;
  int qps;
  bool with_64mib = false;  // one more payload of 64 MiB
};
// Stable ctest names (the default printer shows the struct's padding bytes).
void PrintTo(const RingCase& c, std::ostream* os) {
  *os << "v" << c.version << " " << c.nranks << " ranks " << c.qps << " QPs" << (c.with_64mib ? " 64 MiB" : "");
}

// Runs the ring; the child prints its failure, the parent reports codes.
void run_ring(const VerbsEnv& env, const RingCase& rc, const std::string& plan, int planned_qps_per_rank) {
  std::vector<std::size_t> payloads = {0, 1, 4099, std::size_t{1} << 20};
  if (rc.with_64mib) payloads.push_back(std::size_t{64} << 20);
  Children kids = fork_children(rc.nranks, [&](int rank, std::uint16_t port) {
    if (port == 0) return 2;
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
    std::string err = run_ring_rank(r);
    if (!err.empty()) std::fprintf(stderr, "%s\n", err.c_str());
    return err.empty() ? 0 : 1;
  });
  auto store = coll::TcpStore::open("127.0.0.1", 0, true, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  const std::uint16_t port = store ? (*store)->port() : 0;
  std::vector<int> codes = release_and_wait(kids, port, std::chrono::seconds(150));
  ASSERT_TRUE(store) << store.status().message();
  for (int i = 0; i < rc.nranks; ++i) EXPECT_EQ(codes[i], 0) << "rank " << i << " (124 = timed out)";
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

std::string ip_of(const std::string& device) {
  auto d = verbs::Device::open(verbs::testing::device_named(device));
  return d ? d->gid().ipv4() : "";
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

// Bad input: an error code and a log line, never a crash.
std::vector<std::string>& log_lines() {
  static std::vector<std::string> lines;
  return lines;
}
void collect_log(ncclDebugLogLevel, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  log_lines().push_back(buf);
}

std::string bad_input(const VerbsEnv& env, int version) {
  auto said = [](const std::string& what) {
    for (const auto& l : log_lines()) {
      if (l.find(what) != std::string::npos) return true;
    }
    return false;
  };
  setenv("WEFT_NCCL_DEVICES", env.dev_a.c_str(), 1);
  // A plan whose flows all leave other hosts.
  routing::RoutePlan other;
  other.collective = "nccl-ring";
  other.ranks = 2;
  routing::PlanFlow f;
  f.src_rank = 0;
  f.dst_rank = 1;
  f.src_host = "x";
  f.dst_host = "y";
  f.src_addr = "192.0.2.1";
  f.dst_addr = "192.0.2.2";
  f.sport = 50000;
  f.dport = 4791;
  other.flows.push_back(f);
  const std::string plan_path = fmt::format("/tmp/weft-nccl-other-{}.json", getpid());
  if (!routing::save_plan(other, plan_path).is_ok()) return "save_plan";
  setenv("WEFT_PLAN", plan_path.c_str(), 1);
  auto d = Driver::load(version);
  if (!d) return d.status().message();
  ncclResult_t r = d->init(collect_log);
  unlink(plan_path.c_str());
  if (r != ncclInvalidArgument) return fmt::format("init with another host's plan returned {}", static_cast<int>(r));
  if (!said("lists no flow from this host's NICs")) return "no log line for the foreign plan";
  unsetenv("WEFT_PLAN");
  if (d->init(collect_log) != ncclSuccess) return "init without plan";
  Props p;
  if (d->properties(1, &p) != ncclInvalidArgument) return "getProperties(1) with one device";
  if (!said("device index 1 out of range (0..0)")) return "no log line for device 1";
  std::uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* lc = nullptr;
  if (d->listen(-1, handle, &lc) != ncclInvalidArgument || lc != nullptr) return "listen(-1)";
  if (d->listen(0, handle, &lc) != ncclSuccess) return "listen(0)";
  std::uint8_t garbage[NCCL_NET_HANDLE_MAXSIZE];
  for (std::size_t i = 0; i < sizeof(garbage); ++i) garbage[i] = static_cast<std::uint8_t>(i * 37 + 1);
  std::memset(garbage + 120, 0, 8);  // the connector's own state slot starts empty, as NCCL's copy does
  void* sc = nullptr;
  if (d->connect(0, garbage, &sc) != ncclInvalidArgument || sc != nullptr) return "connect(garbage)";
  if (!said("not weft's")) return "no log line for the garbage handle";
  std::uint8_t stray[NCCL_NET_HANDLE_MAXSIZE];
  std::memcpy(stray, handle, sizeof(stray));
  stray[100] = 1;
  if (d->connect(0, stray, &sc) != ncclInvalidArgument || sc != nullptr) return "connect(stray byte)";
  if (d->connect(3, handle, &sc) != ncclInvalidArgument) return "connect(device 3)";
  if (d->close_listen(lc) != ncclSuccess) return "closeListen";
  if (d->counters().errors < 5) return fmt::format("error counter {}", d->counters().errors);
  return "";
}

class BadInput : public ::testing::TestWithParam<int> {};

TEST_P(BadInput, IsAnErrorCodeAndALogLineNeverACrash) {
  WEFT_REQUIRE_VERBS_ENV(env);
  Children kids = fork_children(1, [&](int, std::uint16_t) {
    std::string err = bad_input(env, GetParam());
    if (!err.empty()) std::fprintf(stderr, "%s\n", err.c_str());
    return err.empty() ? 0 : 1;
  });
  EXPECT_EQ(release_and_wait(kids, 1, std::chrono::seconds(60))[0], 0);
}

INSTANTIATE_TEST_SUITE_P(V, BadInput, ::testing::Values(8, 11),
                         [](const auto& p) { return "v" + std::to_string(p.param); });

}  // namespace
}  // namespace weft::nccl_net::testing
