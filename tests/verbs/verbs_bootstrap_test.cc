// The verbs transport's bootstrap sockets (collectives/verbs/bootstrap.h)
// among strangers: connections to a rank's bootstrap port that are not a
// peer's are dropped and counted, and a peer that never comes is reported
// with the reason the last stranger was turned away. TCP on loopback only:
// no RDMA device needed.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "../collectives/strangers.h"
#include "verbs/bootstrap.h"

namespace weft::verbs {
namespace {

using namespace std::chrono_literals;
using coll::Clock;
using coll::testing::GatedStore;
using coll::testing::stranger;

std::string hello(uint32_t magic, uint32_t rank, uint32_t size) {
  std::string h(16, '\0');
  for (int i = 0; i < 4; ++i) {
    h[static_cast<size_t>(i)] = static_cast<char>(magic >> (24 - 8 * i));
    h[static_cast<size_t>(4 + i)] = static_cast<char>(rank >> (24 - 8 * i));
    h[static_cast<size_t>(8 + i)] = static_cast<char>(size >> (24 - 8 * i));
  }
  return h;
}
constexpr uint32_t kHelloMagic = 0x57465648;  // "WFVH", bootstrap.cc

TEST(VerbsBootstrap, StrangersOnABootstrapPortAreDroppedAndCountedAndTheMeshForms) {
  constexpr int kRanks = 3;
  GatedStore store("weft/verbs/addr/2");
  std::vector<uint64_t> dropped(kRanks, 0);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      coll::TransportConfig cfg;
      cfg.rank = r;
      cfg.size = kRanks;
      const std::vector<int> peers = cfg.peer_ranks();
      const auto d = Clock::now() + 30s;
      auto fds = internal::connect_mesh(cfg, peers, "127.0.0.1", store, d, &dropped[static_cast<size_t>(r)]);
      ASSERT_TRUE(fds) << fds.status().to_string();
      std::vector<int> raw;
      for (auto& fd : *fds) raw.push_back(fd.get());
      Status s = internal::exchange_ready(raw, peers, d);
      EXPECT_TRUE(s) << s.to_string();
    });
  }
  auto addr = store.inner.get("weft/verbs/addr/2", Clock::now() + 30s);
  ASSERT_TRUE(addr) << addr.status().to_string();
  std::vector<coll::tcp::Fd> strangers;
  strangers.push_back(stranger(*addr, std::string(16, '\x01')));         // not the protocol
  strangers.push_back(stranger(*addr, hello(kHelloMagic, 0, 9)));        // another job's size
  strangers.push_back(stranger(*addr, hello(kHelloMagic, 2, kRanks)));   // rank 2 itself
  strangers.push_back(stranger(*addr, ""));                              // says nothing
  store.open();
  for (auto& t : ranks) t.join();
  EXPECT_EQ(dropped, (std::vector<uint64_t>{0, 0, 4}));
}

TEST(VerbsBootstrap, APeerThatNeverComesIsNamedWithWhyTheLastStrangerWasDropped) {
  coll::MemoryStore store;
  coll::TransportConfig cfg;
  cfg.rank = 1;
  cfg.size = 2;
  ASSERT_TRUE(store.set("weft/verbs/addr/0", "127.0.0.1:1"));  // rank 1 connects to no one: 0 is lower
  uint64_t dropped = 0;
  Result<std::vector<coll::tcp::Fd>> fds = unavailable("not run");
  std::thread rank1([&] { fds = internal::connect_mesh(cfg, {0}, "127.0.0.1", store, Clock::now() + 1s, &dropped); });
  auto addr = store.get("weft/verbs/addr/1", Clock::now() + 10s);
  ASSERT_TRUE(addr) << addr.status().to_string();
  coll::tcp::Fd s = stranger(*addr, hello(kHelloMagic, 0, 9));
  rank1.join();
  ASSERT_FALSE(fds);
  EXPECT_EQ(fds.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(fds.status().message(),
            "waiting for rank(s) 0 to connect: 0 of 1 connections arrived in time (1 dropped, the last: rank 0 was "
            "started with 9 ranks, this rank with 2)");
  EXPECT_EQ(dropped, 1u);
}

}  // namespace
}  // namespace weft::verbs
