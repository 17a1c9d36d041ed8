// The TCP store beside real work: many clients at once, a job whose store
// port strangers talk garbage to, and connecting to an address that drops
// every SYN.
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "harness.h"
#include "store_raw_client.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

std::string value_of(int i) { return std::string(static_cast<size_t>(37 * i + 1), static_cast<char>('a' + i % 26)); }

TEST(TcpStoreClients, ThirtyTwoClientsAtOnceEachGetEveryOthersKeyBesideTwoSilentConnections) {
  auto server = TcpStore::open("127.0.0.1", 0, true, Clock::now() + 10s);
  ASSERT_TRUE(server) << server.status().to_string();
  const uint16_t port = (*server)->port();
  // Two connections that never finish their hello hold up no one.
  RawStoreClient silent(port), half(port);
  half.send(store_hello().substr(0, 20));
  constexpr int kClients = 32;
  std::atomic<int> done{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < kClients; ++i) {
    ts.emplace_back([&, i] {
      auto c = store_client(port);
      ASSERT_TRUE(c) << c.status().to_string();
      ASSERT_TRUE((*c)->set("rank/" + std::to_string(i), value_of(i)));
      for (int j = 0; j < kClients; ++j) {
        auto v = (*c)->get("rank/" + std::to_string(j), Clock::now() + 30s);  // waits for j's set
        ASSERT_TRUE(v) << v.status().to_string();
        ASSERT_EQ(*v, value_of(j)) << "client " << i << " reading " << j;
      }
      ++done;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(done.load(), kClients);
  const TcpStoreCounters n = (*server)->counters();
  EXPECT_EQ(n.accepted, 1u + 2u + kClients);  // the server's own client, the two silent ones, the 32
  EXPECT_EQ(n.garbage + n.refused + n.timed_out + n.oversize, 0u);
}

// Strangers on the store's port, each a way in which a real one misbehaves
// (6 dropped as garbage, 2 at the handshake timeout),
// while a 3-rank job meets through the store and runs an AllReduce over tcp.
void misbehave(uint16_t port) {
  {
    RawStoreClient c(port);  // bytes of something else
    c.send(std::string(100, '\xab'));
    EXPECT_TRUE(c.closed_by_server());
  }
  {
    RawStoreClient c(port);  // a few bytes of another protocol, then waiting for an answer
    c.send("SSH-2.0\r\n");
    EXPECT_TRUE(c.closed_by_server());
  }
  {
    RawStoreClient c(port);  // a health check speaking HTTP
    c.send("GET / HTTP/1.1\r\nHost: weft\r\nUser-Agent: health-check\r\n\r\n");
    EXPECT_TRUE(c.closed_by_server());
  }
  {
    RawStoreClient c(port);  // a store client of another protocol version
    c.send(store_hello(store_wire::kMagic, 7));
    auto r = c.reply();
    EXPECT_EQ(r.first, store_wire::kError);
    EXPECT_EQ(r.second, "store protocol version 7; this store speaks 1");
    EXPECT_TRUE(c.closed_by_server());
  }
  {
    RawStoreClient c(port);  // an unknown request
    ASSERT_TRUE(c.handshake());
    c.send(store_request(9, 0, 0));
    EXPECT_TRUE(c.closed_by_server());
  }
  {
    RawStoreClient c(port);  // a second request while its get waits
    ASSERT_TRUE(c.handshake());
    c.send(store_request(store_wire::kGet, 5, 0, "never"));
    c.send(store_request(store_wire::kGet, 5, 0, "again"));
    EXPECT_TRUE(c.closed_by_server());
  }
  RawStoreClient silent(port), half(port);  // no hello, half a hello: the handshake timeout
  half.send(store_hello().substr(0, 30));
  EXPECT_TRUE(silent.closed_by_server());
  EXPECT_TRUE(half.closed_by_server());
}

TEST(TcpStoreClients, GarbageClientsBesideAJobAreDroppedAndCountedAndTheJobSucceeds) {
  TcpStoreOptions o;
  o.limits.handshake_timeout = 300ms;
  auto server = TcpStore::open("127.0.0.1", 0, true, Clock::now() + 10s, o);
  ASSERT_TRUE(server) << server.status().to_string();
  const uint16_t port = (*server)->port();
  std::thread strangers([&] { misbehave(port); });
  constexpr int kRanks = 3;
  constexpr size_t kCount = 1001;
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      std::unique_ptr<TcpStore> own;
      Store* store = server->get();
      if (r != 0) {
        auto c = store_client(port, o);
        ASSERT_TRUE(c) << c.status().to_string();
        own = std::move(*c);
        store = own.get();
      }
      CommConfig cfg;
      cfg.rank = r;
      cfg.size = kRanks;
      cfg.transport = "tcp";
      cfg.timeout = 60s;
      auto comm = Communicator::create(cfg, *store);
      ASSERT_TRUE(comm) << comm.status().to_string();
      std::vector<int32_t> v(kCount);
      std::iota(v.begin(), v.end(), r);
      Status s = (*comm)->allreduce(v.data(), v.data(), kCount, DataType::kI32, ReduceOp::kSum);
      ASSERT_TRUE(s) << s.to_string();
      for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(v[i], static_cast<int32_t>(3 * i + 3)) << i;  // i + (i+1) + (i+2)
    });
  }
  for (auto& t : ranks) t.join();
  strangers.join();
  const TcpStoreCounters n = (*server)->counters();
  EXPECT_EQ(n.garbage, 6u);
  EXPECT_EQ(n.timed_out, 2u);
  EXPECT_EQ(n.refused, 0u);
  EXPECT_EQ(n.accepted, 1u + (kRanks - 1) + 8u);
}

// A listener whose accept queue is full drops further SYNs (tcp_conn_request
// in net/ipv4/tcp_input.c: "listen queue overflow"): from the client's side,
// an address that never answers, on loopback and without privileges.
TEST(TcpStoreConnect, ConnectingToAnAddressThatDropsSynsEndsAtTheDeadline) {
  tcp::Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener.get(), 0), 0);
  const uint16_t port = tcp::local_port(listener.get());
  std::vector<tcp::Fd> queued;  // fill the accept queue: the next connect times out
  for (int i = 0; i < 4; ++i) {
    auto fd = tcp::connect_to(tcp::Endpoint{"127.0.0.1", port}, "0.0.0.0", 0, 1 << 16, Clock::now() + 200ms);
    if (!fd) break;
    queued.push_back(std::move(*fd));
  }
  ASSERT_FALSE(queued.empty());
  ASSERT_LT(queued.size(), 4u) << "the accept queue never filled";
  for (auto budget : {300ms, 700ms}) {
    const auto t0 = Clock::now();
    auto s = TcpStore::open("127.0.0.1", port, false, t0 + budget);
    const auto took = Clock::now() - t0;
    ASSERT_FALSE(s);
    EXPECT_EQ(s.status().code(), StatusCode::kDeadlineExceeded) << s.status().to_string();
    // Each attempt's SYN waits tcp::kRepath (250 ms) at most before another
    // source port is tried: 300 ms holds 2 attempts, 700 ms 3.
    const auto tried = (budget + tcp::kRepath - 1ms) / tcp::kRepath;
    EXPECT_EQ(s.status().message(),
              fmt::format("TCP store at 127.0.0.1:{} (MASTER_ADDR:MASTER_PORT): connect to 127.0.0.1:{}: no connection "
                          "before the deadline (Connection timed out; {} source ports tried)",
                          port, port, tried));
    EXPECT_GE(took, budget);
    EXPECT_LT(took, budget + 500ms);
  }
}

}  // namespace
}  // namespace weft::coll::testing
