// The TCP-SYN reflector keeps answering after its captured interface goes
// down and up, and after it is deleted and made again with the same name and
// address (a NIC flap, a veth made again): libpcap's handle dies with a
// deleted interface, and the reflector must open a new one, without spinning
// a core while there is nothing to open. Two namespaces of the test's own
// joined by a veth pair; nothing leaves the machine. Label netns: skips with
// the reason when not root.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "netns_fabric.h"
#include "weft/probe/backend.h"
#include "weft/probe/reflector.h"

namespace weft::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kRun = 0x5eed0002;
constexpr uint16_t kTcpPort = 5201;
constexpr uint16_t kSport = 41000;
constexpr uint8_t kProbeDscp = 8;

// Sender 192.0.2.1 on "wfs" in namespace tx; reflector 192.0.2.2 on "wfr" in
// namespace rx (TEST-NET-1, RFC 5737). Deleted with their namespaces by the
// destructor, or by the reaper if this process dies first.
class VethPair {
 public:
  ~VethPair() {
    if (made_) (void)run_shell(fmt::format("ip netns del {} 2>/dev/null; ip netns del {} 2>/dev/null; true", tx_, rx_));
  }
  Status up() {
    auto reaper = Reaper::start(fmt::format("ip netns del {} 2>/dev/null; ip netns del {} 2>/dev/null", tx_, rx_));
    if (!reaper) return reaper.status();
    reaper_ = std::move(*reaper);
    made_ = true;
    auto r = run_shell(fmt::format("ip netns add {0} && ip netns add {1} && ip -n {0} link set lo up && "
                                   "ip -n {1} link set lo up",
                                   tx_, rx_));
    return r ? make() : r.status();
  }
  // The pair again, after `ip link del` (which takes both ends); the
  // reflector's end named `rx_name`.
  Status make(const std::string& rx_name = "wfr") {
    auto r = run_shell(fmt::format(
        "ip -n {0} link add wfs type veth peer name {2} netns {1} && ip -n {0} addr add 192.0.2.1/24 dev wfs && "
        "ip -n {1} addr add 192.0.2.2/24 dev {2} && ip -n {0} link set wfs up && ip -n {1} link set {2} up",
        tx_, rx_, rx_name));
    return r ? ok_status() : r.status();
  }
  Status rx_shell(const std::string& cmd) {
    auto r = run_shell(fmt::format("ip -n {} {}", rx_, cmd));
    return r ? ok_status() : r.status();
  }
  const std::string& tx() const { return tx_; }
  const std::string& rx() const { return rx_; }

 private:
  std::string tx_ = fmt::format("wfrfltx{}", ::getpid());
  std::string rx_ = fmt::format("wfrflrx{}", ::getpid());
  Reaper reaper_;
  bool made_ = false;
};

class TcpSynReflector : public ::testing::Test {
 protected:
  void SetUp() override {
    WEFT_SKIP_UNLESS_NETNS();
    const Status st = net_.up();
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    keys_.set(kRun, key_);
    probe::ReflectorConfig rc;
    rc.bind_ip = ipv4_or_zero("192.0.2.2");  // capture on the interface holding it: wfr
    rc.udp_port = 4791;
    rc.tcp_port = kTcpPort;
    rc.probe_dscp = kProbeDscp;
    reflector_ = std::make_unique<probe::Reflector>(keys_, rc);
    // setns(2) is per thread; the reflector's threads are born in rx.
    Status started = unavailable("not run");
    std::thread([&] {
      started = enter_netns(net_.rx());
      if (started) started = reflector_->start();
    }).join();
    ASSERT_TRUE(started.is_ok()) << started.to_string();
  }

  // Sends TCP-SYN probes from tx (a fresh sender, a new sequence every
  // 200 ms) until one is answered or `within` has passed.
  std::optional<probe::ProbeAnswer> probe_answered(Clock::duration within) {
    std::optional<probe::ProbeAnswer> got;
    std::thread([&] {
      ASSERT_TRUE(enter_netns(net_.tx()).is_ok());
      probe::SenderConfig sc;
      sc.local_ip = ipv4_or_zero("192.0.2.1");
      sc.dport = kTcpPort;
      sc.probe_dscp = kProbeDscp;
      sc.run = kRun;
      sc.key = key_;
      auto tx = probe::make_sender("tcp-syn", sc);
      ASSERT_TRUE(tx) << tx.status().to_string();
      ASSERT_TRUE((*tx)->open_ports(kSport, 1).is_ok());
      const auto deadline = Clock::now() + within;
      while (!got && Clock::now() < deadline) {
        const uint32_t seq = ++sequence_;  // never reused: the reflector refuses replays
        const probe::ProbeSend p{.dst_ip = ipv4_or_zero("192.0.2.2"), .sport = kSport, .sequence = seq};
        ASSERT_TRUE((*tx)->send({&p, 1}).is_ok());
        const auto resend = Clock::now() + 200ms;
        while (!got && Clock::now() < resend) {
          std::vector<probe::ProbeAnswer> out;
          ASSERT_TRUE((*tx)->poll(50, out).is_ok());
          for (const auto& a : out)
            if (a.sequence == seq) got = a;
        }
      }
    }).join();
    return got;
  }

  void expect_answered(Clock::duration within, const char* when) {
    const auto t0 = Clock::now();
    const auto a = probe_answered(within);
    ASSERT_TRUE(a.has_value()) << "no answer " << when << " within "
                               << std::chrono::duration_cast<std::chrono::milliseconds>(within).count() << " ms";
    EXPECT_EQ(a->dst_ip, ipv4_or_zero("192.0.2.2"));
    EXPECT_EQ(a->sport, kSport);
    EXPECT_EQ(a->dscp_seen, kProbeDscp);  // one link, no spine rewrote it
    EXPECT_EQ(a->spine, 0);
    std::printf("answered %s after %lld ms\n", when,
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()));
  }

  // This process's CPU time over `window` of doing nothing: a reflector
  // thread that spins on a broken capture would use all of it.
  static std::chrono::nanoseconds cpu_while_idle(Clock::duration window) {
    auto cpu = [] {
      timespec ts{};
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
    };
    const auto c0 = cpu();
    std::this_thread::sleep_for(window);
    const auto used = cpu() - c0;
    std::printf("CPU over %lld ms: %.1f ms\n",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(window).count()),
                std::chrono::duration<double, std::milli>(used).count());
    return used;
  }

  VethPair net_;  // declared first: outlives the reflector
  probe::KeyRing keys_;
  probe::MacKey key_ = probe::MacKey::from_string("tcp-syn reflector netns test");
  std::unique_ptr<probe::Reflector> reflector_;
  uint32_t sequence_ = 0;
};

TEST_F(TcpSynReflector, AnswersAgainAfterItsInterfaceWentDownAndUp) {
  expect_answered(3s, "before the flap");
  ASSERT_TRUE(net_.rx_shell("link set wfr down").is_ok());
  EXPECT_LT(cpu_while_idle(1s), 250ms);
  ASSERT_TRUE(net_.rx_shell("link set wfr up").is_ok());
  expect_answered(6s, "after down and up");
  EXPECT_EQ(reflector_->stats().rejected_total(), 0u);
}

TEST_F(TcpSynReflector, AnswersAgainAfterItsInterfaceWasDeletedAndMadeAgain) {
  expect_answered(3s, "before the delete");
  ASSERT_TRUE(net_.rx_shell("link del wfr").is_ok());
  EXPECT_LT(cpu_while_idle(1s), 250ms);  // reopening (and failing) with a back-off, not in a loop
  const Status made = net_.make();
  ASSERT_TRUE(made.is_ok()) << made.to_string();
  // The back-off between attempts is at most 5 s.
  expect_answered(6s, "after delete and re-make");
  EXPECT_EQ(reflector_->stats().rejected_total(), 0u);
  // A stop() while waiting to reopen is not held up by the back-off.
  ASSERT_TRUE(net_.rx_shell("link del wfr").is_ok());
  std::this_thread::sleep_for(1500ms);
  const auto t0 = Clock::now();
  reflector_->stop();
  EXPECT_LT(Clock::now() - t0, 250ms);
}

// The address comes back on an interface of another name (a bond or VLAN
// made again): the capture follows the address, not the old name.
TEST_F(TcpSynReflector, AnswersAgainWhenItsAddressComesBackOnAnotherInterface) {
  expect_answered(3s, "before the move");
  ASSERT_TRUE(net_.rx_shell("link del wfr").is_ok());
  std::this_thread::sleep_for(300ms);  // the capture breaks and its first reopen fails
  const Status made = net_.make("wfr2");
  ASSERT_TRUE(made.is_ok()) << made.to_string();
  expect_answered(6s, "on wfr2");
  EXPECT_EQ(reflector_->stats().rejected_total(), 0u);
}

}  // namespace
}  // namespace weft::test
