// Connecting to the TCP store at an address that drops every SYN ends at the
// caller's deadline, not after the kernel's SYN retries (about two minutes,
// tcp_syn_retries in tcp(7)). The address lives in a network namespace of
// this test's own, where an nftables rule drops the SYNs to it; nothing
// leaves the machine. Label netns: skips with the reason when not root.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <thread>

#include <fmt/format.h>

#include "netns_fabric.h"
#include "tcp/socket.h"
#include "weft/collectives/store.h"
#include "weft/common/reaper.h"

namespace weft::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(TcpStoreNetns, ConnectingToABlackHoledAddressEndsAtTheDeadline) {
  WEFT_SKIP_UNLESS_NETNS();
  const std::string ns = fmt::format("wfstore{}", ::getpid());
  auto reaper = Reaper::start(fmt::format("ip netns del {} 2>/dev/null", ns));  // also if this test dies
  ASSERT_TRUE(reaper) << reaper.status().to_string();
  struct Teardown {
    std::string ns;
    ~Teardown() { (void)run_shell(fmt::format("ip netns del {}", ns)); }
  } teardown{ns};
  // 192.0.2.1 (TEST-NET-1, RFC 5737) on the namespace's loopback; without
  // the rule a SYN to it would be answered (reset: nothing listens).
  auto up = run_shell(fmt::format(
      "ip netns add {0} && ip -n {0} link set lo up && ip -n {0} addr add 192.0.2.1/32 dev lo && "
      "ip netns exec {0} nft add table inet weft && "
      "ip netns exec {0} nft add chain inet weft in '{{ type filter hook input priority 0; }}' && "
      "ip netns exec {0} nft add rule inet weft in ip daddr 192.0.2.1 tcp dport 29500 drop",
      ns));
  ASSERT_TRUE(up) << up.status().to_string();
  for (auto budget : {400ms, 900ms}) {
    Result<std::unique_ptr<coll::TcpStore>> s = unavailable("not run");
    Clock::duration took{};
    // setns(2) moves only the calling thread into the namespace.
    std::thread inside([&] {
      const int fd = ::open(fmt::format("/var/run/netns/{}", ns).c_str(), O_RDONLY | O_CLOEXEC);
      ASSERT_GE(fd, 0);
      ASSERT_EQ(::setns(fd, CLONE_NEWNET), 0);
      ::close(fd);
      const auto t0 = Clock::now();
      s = coll::TcpStore::open("192.0.2.1", 29500, false, t0 + budget);
      took = Clock::now() - t0;
    });
    inside.join();
    ASSERT_FALSE(s);
    EXPECT_EQ(s.status().code(), StatusCode::kDeadlineExceeded) << s.status().to_string();
    // Each attempt's SYN waits tcp::kRepath (250 ms) at most before another
    // source port is tried (collectives/tcp/socket.h).
    const auto tried = (budget + coll::tcp::kRepath - std::chrono::milliseconds(1)) / coll::tcp::kRepath;
    EXPECT_EQ(s.status().message(),
              fmt::format("TCP store at 192.0.2.1:29500 (MASTER_ADDR:MASTER_PORT): connect to 192.0.2.1:29500: no "
                          "connection before the deadline (Connection timed out; {} source ports tried)",
                          tried));
    EXPECT_GE(took, budget);
    EXPECT_LT(took, budget + 500ms);
  }
}

}  // namespace
}  // namespace weft::test
