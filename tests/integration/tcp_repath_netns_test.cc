// An unplanned connection (source port 0) whose SYN a link drops is made
// again from another source port after tcp::kRepath (collectives/tcp/
// socket.h), instead of resending the SYN on the same dead 5-tuple for
// seconds. In a namespace of its own, an nftables rule drops every SYN to the
// listener from a source port that hashes to 0 of 4 (as one dead spine of
// four takes a quarter of the ports); each of 24 connections must then be
// made within kRepath x 10 (all ten ports dropped: 4^-10), and some (all but
// 0.1% of runs) only after a new port was tried.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "netns_fabric.h"
#include "tcp/socket.h"

namespace weft::coll {
namespace {

using Clock = std::chrono::steady_clock;
using test::run_shell;

struct Namespace {
  std::string name = fmt::format("wfrp{}", ::getpid());
  ~Namespace() { (void)run_shell(fmt::format("ip netns del {} 2>/dev/null", name)); }
};

TEST(TcpRepathNetns, AnUnansweredSynIsMadeAgainFromAnotherSourcePort) {
  WEFT_SKIP_UNLESS_NETNS();
  Namespace ns;
  const uint16_t port = 7411;
  ASSERT_TRUE(run_shell(fmt::format("ip netns add {0} && ip -n {0} link set lo up", ns.name)).is_ok());
  auto rule = run_shell(fmt::format("ip netns exec {} nft -f -", ns.name),
                        fmt::format("table ip repath {{\n chain out {{\n  type filter hook output priority 0;\n"
                                    "  tcp dport {} tcp flags & (syn | ack) == syn jhash tcp sport mod 4 == 0 counter drop\n"
                                    " }}\n}}\n",
                                    port));
  ASSERT_TRUE(rule.is_ok()) << rule.status().to_string();
  int slow = 0;
  std::string failure;
  std::thread t([&] {
    if (Status st = test::enter_netns(ns.name); !st) {
      failure = st.to_string();
      return;
    }
    auto listener = tcp::listen_on("127.0.0.1", port, nullptr);
    if (!listener) {
      failure = listener.status().to_string();
      return;
    }
    for (int i = 0; i < 24 && failure.empty(); ++i) {
      const auto t0 = Clock::now();
      auto fd = tcp::connect_to(tcp::Endpoint{"127.0.0.1", port}, "127.0.0.1", 0, 1 << 16, t0 + tcp::kRepath * 10);
      const auto took = Clock::now() - t0;
      if (!fd) {
        failure = fmt::format("connection {}: {}", i, fd.status().to_string());
        break;
      }
      slow += took >= tcp::kRepath;
      tcp::Fd accepted(::accept(listener->get(), nullptr, nullptr));
    }
  });
  t.join();
  EXPECT_EQ(failure, "");
  EXPECT_GE(slow, 1) << "no SYN was dropped: the rule did not bite, the test shows nothing";
  auto counted = run_shell(fmt::format("ip netns exec {} nft list table ip repath", ns.name));
  ASSERT_TRUE(counted.is_ok());
  EXPECT_EQ(counted->find("packets 0 "), std::string::npos) << *counted;
}

}  // namespace
}  // namespace weft::coll
