// The TCP transport among strangers: connections to a rank's listening port
// that are not a peer's are dropped and counted while the job goes on, and
// a peer's abort reason is cut at kMaxAbortReason bytes with a marker.
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "harness.h"
#include "strangers.h"
#include "tcp/tcp_internal.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

std::string hello_bytes(const tcp::Hello& h) { return std::string(reinterpret_cast<const char*>(&h), sizeof h); }

TEST(TcpStrangers, ConnectionsThatAreNoPeersAreDroppedAndCountedAndTheJobSucceeds) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 777;
  GatedStore store("weft/tcp/1");  // rank 1's address: the peers wait until the strangers are queued
  std::vector<uint64_t> dropped(kRanks, ~uint64_t{0});
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      CommConfig cfg;
      cfg.rank = r;
      cfg.size = kRanks;
      cfg.transport = "tcp";
      cfg.timeout = 60s;
      auto comm = Communicator::create(cfg, store);
      ASSERT_TRUE(comm) << comm.status().to_string();
      auto* info = dynamic_cast<tcp::TcpTransportInfo*>((*comm)->transport_for((r + 1) % kRanks));
      ASSERT_NE(info, nullptr);
      dropped[static_cast<size_t>(r)] = info->dropped_connections();
      std::vector<int64_t> v(kCount);
      std::iota(v.begin(), v.end(), int64_t{10} * r);
      Status s = (*comm)->allreduce(v.data(), v.data(), kCount, DataType::kI64, ReduceOp::kSum);
      ASSERT_TRUE(s) << s.to_string();
      for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(v[i], static_cast<int64_t>(3 * i + 30)) << i;
    });
  }
  auto addr = store.inner.get("weft/tcp/1", Clock::now() + 30s);
  ASSERT_TRUE(addr) << addr.status().to_string();
  std::vector<tcp::Fd> strangers;
  strangers.push_back(stranger(*addr, std::string(sizeof(tcp::Hello), '\xcd')));                       // not the protocol
  strangers.push_back(stranger(*addr, hello_bytes(tcp::Hello{tcp::kMagic, 7, 0, 0, 0, 0})));  // no such rank
  strangers.push_back(stranger(*addr, hello_bytes(tcp::Hello{tcp::kMagic, 1, 0, 0, 0, 0})));  // rank 1 itself
  strangers.push_back(stranger(*addr, ""));  // says nothing: held aside, closed 10 s after it came (tcp_connect.cc)
  store.open();
  for (auto& t : ranks) t.join();
  EXPECT_EQ(dropped, (std::vector<uint64_t>{0, 3, 0}));
}

// One-shot on 6 ranks, 64 connections per pair, rank 0 last to the call:
// it finds 5 x 64 = 320 peers' connections queued on its listening socket,
// more than may wait for their hello at once (256, tcp_connect.cc). The
// rest must wait in the backlog: one closed unread is read by its peer as
// rank 0's death ("rank 0 closed the connection this rank opened").
TEST(TcpStrangers, MorePeerConnectionsQueuedThanMayAwaitTheirHelloAreAllServed) {
  constexpr int kRanks = 6, kPerPeer = 64;
  constexpr size_t kCount = 1001;
  rlimit fds{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &fds), 0);
  const rlim_t want = 2 * kRanks * (kRanks - 1) * kPerPeer + 512;
  if (fds.rlim_max < want) GTEST_SKIP() << "needs " << want << " descriptors, the hard limit is " << fds.rlim_max;
  const rlimit before = fds;
  fds.rlim_cur = std::max(fds.rlim_cur, want);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &fds), 0);
  std::vector<uint64_t> dropped(kRanks, ~uint64_t{0});
  run_ranks(
      kRanks,
      [&](Communicator& comm) {
        const int r = comm.rank();
        if (r == 0) std::this_thread::sleep_for(2s);  // the peers connect to it meanwhile
        std::vector<int64_t> v(kCount);
        std::iota(v.begin(), v.end(), int64_t{10} * r);
        CollectiveOptions o;
        o.algorithm = Algorithm::kOneShot;
        Status s = comm.allreduce(v.data(), v.data(), kCount, DataType::kI64, ReduceOp::kSum, o);
        ASSERT_TRUE(s) << "rank " << r << ": " << s.to_string();
        for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(v[i], static_cast<int64_t>(kRanks * i + 150)) << i;
        auto* info = dynamic_cast<tcp::TcpTransportInfo*>(comm.transport_for((r + 1) % kRanks));
        ASSERT_NE(info, nullptr);
        dropped[static_cast<size_t>(r)] = info->dropped_connections();
      },
      [](CommConfig& cfg) {
        cfg.transport = "tcp";
        cfg.connect_on_demand = true;
        cfg.tcp.connections_per_peer = kPerPeer;
      });
  ::setrlimit(RLIMIT_NOFILE, &before);
  EXPECT_EQ(dropped, std::vector<uint64_t>(kRanks, 0));
}

struct AbortCase {
  uint64_t declared;  // the kAbort header's length
  size_t sent;        // bytes of reason actually sent
};
std::ostream& operator<<(std::ostream& o, const AbortCase& c) { return o << c.declared << "/" << c.sent; }

class PeerAbortReason : public ::testing::TestWithParam<AbortCase> {};

// This test plays rank 1 of 2 by hand, so that it can send an abort reason
// no weft rank would (a weft rank sends at most 400 bytes).
TEST_P(PeerAbortReason, IsShownUpToTheBoundThenCutWithAMarker) {
  const AbortCase& c = GetParam();
  MemoryStore store;
  TransportConfig cfg;
  cfg.rank = 0;
  cfg.size = 2;
  Result<std::unique_ptr<Transport>> rank0 = unavailable("not made");
  std::thread t0([&] { rank0 = make_transport(cfg, store, Clock::now() + 20s); });
  tcp::Endpoint mine;
  auto listener = tcp::listen_on("127.0.0.1", 0, &mine);
  ASSERT_TRUE(listener) << listener.status().to_string();
  ASSERT_TRUE(store.set("weft/tcp/1", mine.to_string()));
  auto addr0 = store.get("weft/tcp/0", Clock::now() + 20s);
  ASSERT_TRUE(addr0);
  tcp::Fd out = stranger(*addr0, hello_bytes(tcp::Hello{tcp::kMagic, 1, 0, 0, 0, 0}));
  pollfd pf{listener->get(), POLLIN, 0};
  ASSERT_EQ(::poll(&pf, 1, 20000), 1);
  tcp::Fd in(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));  // rank 0's connection to "rank 1"
  t0.join();
  ASSERT_TRUE(rank0) << rank0.status().to_string();

  std::string reason(c.sent, '\0');
  for (size_t i = 0; i < c.sent; ++i) reason[i] = static_cast<char>('a' + i % 26);
  const tcp::Header h{tcp::kMagic, tcp::kAbort, 0, c.declared};
  std::thread sender([&] {
    const std::string frame = std::string(reinterpret_cast<const char*>(&h), sizeof h) + reason;
    (void)tcp::write_all(out.get(), frame.data(), frame.size(), Clock::now() + 20s);  // fails once shut down
  });
  char buf[8];
  auto mem = (*rank0)->register_memory(buf, sizeof buf);
  ASSERT_TRUE(mem);
  auto ticket = (*rank0)->pair(1)->recv(**mem, 0, sizeof buf);
  ASSERT_TRUE(ticket);
  Status s = (*rank0)->pair(1)->wait_recv(*ticket, Clock::now() + 20s);
  ::shutdown(out.get(), SHUT_RDWR);
  sender.join();
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  const std::string shown = c.declared <= tcp::kMaxAbortReason
                                ? reason
                                : reason.substr(0, tcp::kMaxAbortReason) +
                                      fmt::format(" [... cut: the reason has {} bytes]", c.declared);
  EXPECT_EQ(s.message(), "rank 1 gave up: " + shown);
}

INSTANTIATE_TEST_SUITE_P(Bound, PeerAbortReason,
                         ::testing::Values(AbortCase{5, 5}, AbortCase{1024, 1024}, AbortCase{1025, 1025},
                                           AbortCase{3001, 3001}, AbortCase{2000003, 2000003},
                                           AbortCase{uint64_t{1} << 40, 4099}));

}  // namespace
}  // namespace weft::coll::testing
