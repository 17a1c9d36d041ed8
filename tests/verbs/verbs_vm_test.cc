// Verbs on real RDMA devices (soft-RoCE inside the VM, ctest -L rdma): device
// discovery, messages of awkward sizes across the veth, the event path,
// registered (zero-copy) sends, and faults named by peer and status.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "verbs_env.h"
#include "weft/verbs/device.h"
#include "weft/verbs/oob.h"

namespace weft::verbs::testing {
namespace {

using std::chrono::milliseconds;

TEST(Discovery, EachDeviceHasARoceV2Ipv4GidAndThePortMtu) {
  WEFT_REQUIRE_VERBS_ENV(env);
  auto all = list_devices();
  ASSERT_TRUE(all.is_ok()) << all.status().message();
  for (const std::string& name : {env.dev_a, env.dev_b}) {
    auto dev = Device::open(device_named(name));
    ASSERT_TRUE(dev.is_ok()) << dev.status().message();
    EXPECT_EQ(dev->gid().type, GidType::kRoceV2);
    EXPECT_FALSE(dev->gid().ipv4().empty()) << format_gid(dev->gid().gid);
    EXPECT_FALSE(dev->gid().netdev.empty());
    EXPECT_EQ(dev->port().active_mtu_bytes, mtu_bytes(dev->port().active_mtu));
    EXPECT_EQ(dev->port().state, IBV_PORT_ACTIVE);
    bool listed = false;
    for (const DeviceInfo& d : *all) listed |= d.name == name;
    EXPECT_TRUE(listed) << name << " missing from list_devices()";
    std::printf("%s: port %u %s, MTU %u, GID[%u] %s (%s) on %s\n", name.c_str(), dev->port().port_num,
                std::string(port_state_name(dev->port().state)).c_str(), dev->port().active_mtu_bytes,
                dev->gid().index, format_gid(dev->gid().gid).c_str(), dev->gid().ipv4().c_str(),
                dev->gid().netdev.c_str());
  }
}

TEST(Discovery, GidOverrideAndMissingDeviceAreReportedByName) {
  WEFT_REQUIRE_VERBS_ENV(env);
  auto nodev = Device::open(device_named("no_such_dev0"));
  ASSERT_FALSE(nodev.is_ok());
  EXPECT_NE(nodev.status().message().find("no_such_dev0"), std::string::npos);
  auto dev = Device::open(device_named(env.dev_a));
  ASSERT_TRUE(dev.is_ok());
  DeviceConfig pinned = device_named(env.dev_a);
  pinned.gid_index = dev->gid().index;
  auto same = Device::open(pinned);
  ASSERT_TRUE(same.is_ok()) << same.status().message();
  EXPECT_EQ(same->gid().gid, dev->gid().gid);
  DeviceConfig by_ip = device_named(env.dev_a);
  by_ip.ipv4 = "192.0.2.77";
  auto wrong_ip = Device::open(by_ip);
  ASSERT_FALSE(wrong_ip.is_ok());
  EXPECT_NE(wrong_ip.status().message().find("192.0.2.77"), std::string::npos);
}

// Registers a buffer with a context, for the tests' sends and receives.
RegionRef reg(Context& ctx, std::vector<std::uint8_t>& buf) {
  if (buf.empty()) return nullptr;
  auto e = ctx.register_buffer(buf.data(), buf.size());
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? *e : nullptr;
}

// Both sides send one message to each other at the same time, so each one's
// send waits for the other's credit.
struct SizeCase {
  std::size_t bytes;
  std::uint32_t queue_depth;
};
class Messages : public ::testing::TestWithParam<SizeCase> {};

TEST_P(Messages, ArriveIntactBothWaysAcrossTheVeth) {
  WEFT_REQUIRE_VERBS_ENV(env);
  const SizeCase c = GetParam();
  ConnectionConfig base;
  base.queue_depth = c.queue_depth;
  auto p = connect_pair(env, {0}, {0}, base);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  const std::string netdev = netdev_of(p->a->device());
  const std::uint64_t before = netdev_bytes(netdev);
  auto to_b = pattern(c.bytes, 1), to_a = pattern(c.bytes, 2);
  std::vector<std::uint8_t> at_a(c.bytes, 0xEE), at_b(c.bytes, 0xEE);
  auto mr_to_b = reg(*p->a, to_b), mr_at_a = reg(*p->a, at_a);
  auto mr_to_a = reg(*p->b, to_a), mr_at_b = reg(*p->b, at_b);
  Status sb;
  std::thread tb([&] {
    Connection& y = *p->cb[0];
    sb = y.irecv(at_b.data(), at_b.size(), mr_at_b).status();
    if (sb.is_ok()) sb = y.isend(to_a.data(), to_a.size(), mr_to_a).status();
    if (sb.is_ok()) sb = p->b->wait_all(y);
  });
  Connection& x = *p->ca[0];
  Status sa = x.irecv(at_a.data(), at_a.size(), mr_at_a).status();
  if (sa.is_ok()) sa = x.isend(to_b.data(), to_b.size(), mr_to_b).status();
  if (sa.is_ok()) sa = p->a->wait_all(x);
  tb.join();
  ASSERT_TRUE(sa.is_ok()) << sa.message();
  ASSERT_TRUE(sb.is_ok()) << sb.message();
  EXPECT_EQ(at_b, to_b);
  EXPECT_EQ(at_a, to_a);
  EXPECT_EQ(x.stats().writes, 1u);
  EXPECT_EQ(x.stats().credits_sent, 1u);
  EXPECT_EQ(x.stats().messages_received, 1u);
  // Both payloads crossed the veth (each counted on tx of one end and rx of the other).
  EXPECT_GE(netdev_bytes(netdev) - before, 2 * c.bytes) << netdev;
}
INSTANTIATE_TEST_SUITE_P(Sizes, Messages,
                         ::testing::Values(SizeCase{0, 4}, SizeCase{1, 4}, SizeCase{3, 4}, SizeCase{13, 64},
                                           SizeCase{4095, 4}, SizeCase{4096, 64}, SizeCase{65537, 4},
                                           SizeCase{300007, 64}, SizeCase{1 << 20, 4}),
                         [](const auto& tp) {
                           return std::to_string(tp.param.bytes) + "B_depth" + std::to_string(tp.param.queue_depth);
                         });

TEST(Messages, ManyMoreThanTheCreditLimitArriveInOrder) {
  WEFT_REQUIRE_VERBS_ENV(env);
  ConnectionConfig base;
  base.queue_depth = 4;  // at most 2 credits out: 13 receives posted at once must recycle them
  auto p = connect_pair(env, {0}, {0}, base);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  constexpr int kMessages = 13;
  std::vector<std::vector<std::uint8_t>> out, in;
  for (int m = 0; m < kMessages; ++m) {
    out.push_back(pattern(m == 5 ? 0 : 1000 + 517 * m, 10 + m));
    in.emplace_back(out.back().size());
  }
  std::vector<RegionRef> mr_out, mr_in;
  for (auto& o : out) mr_out.push_back(reg(*p->a, o));
  for (auto& i : in) mr_in.push_back(reg(*p->b, i));
  Status sb;
  std::thread tb([&] {
    for (int m = 0; m < kMessages && sb.is_ok(); ++m) sb = p->cb[0]->irecv(in[m].data(), in[m].size(), mr_in[m]).status();
    if (sb.is_ok()) sb = p->b->wait_recvs(*p->cb[0]);
  });
  Status sa;
  for (int m = 0; m < kMessages && sa.is_ok(); ++m) sa = p->ca[0]->isend(out[m].data(), out[m].size(), mr_out[m]).status();
  if (sa.is_ok()) sa = p->a->wait_sends(*p->ca[0]);
  tb.join();
  ASSERT_TRUE(sa.is_ok()) << sa.message();
  ASSERT_TRUE(sb.is_ok()) << sb.message();
  for (int m = 0; m < kMessages; ++m) EXPECT_EQ(in[m], out[m]) << "message " << m;
  EXPECT_EQ(p->cb[0]->stats().credits_sent, static_cast<std::uint64_t>(kMessages));
  EXPECT_EQ(p->ca[0]->sends_done(), static_cast<Ticket>(kMessages));
}

TEST(Completions, TheEventPathDeliversWhenPollingIsOff) {
  WEFT_REQUIRE_VERBS_ENV(env);
  auto p = connect_pair(env, {0}, {0}, {}, CqConfig{256, 0});
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  auto msg = pattern(5000, 3);
  std::vector<std::uint8_t> got(msg.size());
  auto mr_msg = reg(*p->a, msg), mr_got = reg(*p->b, got);
  Status sb;
  std::thread tb([&] {
    sb = p->cb[0]->irecv(got.data(), got.size(), mr_got).status();
    if (sb.is_ok()) sb = p->b->wait_recvs(*p->cb[0]);
  });
  std::this_thread::sleep_for(milliseconds(300));  // the receiver is asleep on the channel by now
  Status sa = p->ca[0]->isend(msg.data(), msg.size(), mr_msg).status();
  if (sa.is_ok()) sa = p->a->wait_sends(*p->ca[0]);
  tb.join();
  ASSERT_TRUE(sa.is_ok()) << sa.message();
  ASSERT_TRUE(sb.is_ok()) << sb.message();
  EXPECT_EQ(got, msg);
  EXPECT_GT(p->b->cq().sleeps(), 0u) << "the receiver never slept on the completion channel";
}

TEST(Faults, SizeMismatchIsReportedOnBothSidesWithBothSizes) {
  WEFT_REQUIRE_VERBS_ENV(env);
  auto p = connect_pair(env, {0}, {0});
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  auto msg = pattern(700, 4);
  std::vector<std::uint8_t> small(500);
  ASSERT_TRUE(p->ca[0]->isend(msg.data(), msg.size(), reg(*p->a, msg)).is_ok());
  ASSERT_TRUE(p->cb[0]->irecv(small.data(), small.size(), reg(*p->b, small)).is_ok());
  Status sb;
  std::thread tb([&] { sb = p->b->wait_recvs(*p->cb[0]); });
  Status sa = p->a->wait_sends(*p->ca[0]);
  tb.join();
  for (const Status* s : {&sa, &sb}) {
    ASSERT_FALSE(s->is_ok());
    EXPECT_NE(s->message().find("700"), std::string::npos) << s->message();
    EXPECT_NE(s->message().find("500"), std::string::npos) << s->message();
  }
  EXPECT_NE(sa.message().find("b0"), std::string::npos) << sa.message();
  EXPECT_NE(sb.message().find("a0"), std::string::npos) << sb.message();
  std::printf("sender: %s\nreceiver: %s\n", sa.message().c_str(), sb.message().c_str());
}

TEST(Faults, AQpInTheErrorStateIsReportedByCompletionStatusName) {
  WEFT_REQUIRE_VERBS_ENV(env);
  auto p = connect_pair(env, {0}, {0});
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  std::vector<std::uint8_t> buf(100);
  ASSERT_TRUE(p->ca[0]->force_qp_error().is_ok());
  ASSERT_TRUE(p->ca[0]->irecv(buf.data(), buf.size(), reg(*p->a, buf)).is_ok());
  Status s = p->a->wait_recvs(*p->ca[0]);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("IBV_WC_WR_FLUSH_ERR"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("b0"), std::string::npos) << s.message();
  std::printf("reported: %s\n", s.message().c_str());
}

TEST(Faults, AWrongRemoteKeyIsReportedAsRemoteAccessError) {
  WEFT_REQUIRE_VERBS_ENV(env);
  auto p = connect_pair(env, {0}, {0});
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  auto msg = pattern(64, 5);
  std::vector<std::uint8_t> got(64);
  p->cb[0]->corrupt_next_credit();  // as if the credit had been corrupted on the way
  ASSERT_TRUE(p->cb[0]->irecv(got.data(), got.size(), reg(*p->b, got)).is_ok());
  ASSERT_TRUE(p->ca[0]->isend(msg.data(), msg.size(), reg(*p->a, msg)).is_ok());
  Status s = p->a->wait_sends(*p->ca[0]);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("IBV_WC_REM_ACCESS_ERR"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("b0"), std::string::npos) << s.message();
  std::printf("reported: %s\n", s.message().c_str());
}

// The peer is a separate process that connects and is then SIGKILLed; the
// bootstrap socket is the liveness fd, so the survivor learns at once. (The RC
// retry path alone is not relied on: rxe on Linux 6.1 raised no
// IBV_WC_RETRY_EXC_ERR within 30 s for writes to a killed peer's QP.)
TEST(PeerKilled, TheSurvivorGetsAnErrorNamingThePeerWithinTheTimeout) {
  WEFT_REQUIRE_VERBS_ENV(env);
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // rank 1: connect, tell the parent, then wait to be killed
    close(sv[0]);
    auto ctx = Context::open(context_on(env.dev_b));
    if (!ctx) _exit(2);
    auto c = (*ctx)->create_connection(connection_to("rank 0"));
    if (!c) _exit(3);
    auto remote = exchange_endpoint(sv[1], (*c)->local_info(), milliseconds(20000), "rank 0");
    if (!remote || !(*c)->connect(*remote).is_ok()) _exit(4);
    char ready = 'r';
    if (write(sv[1], &ready, 1) != 1) _exit(5);
    pause();
    _exit(0);
  }
  close(sv[1]);
  const milliseconds timeout(30000);
  auto ctx = Context::open(context_on(env.dev_a, timeout));
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().message();
  ConnectionConfig cc = connection_to("rank 1 (pid " + std::to_string(child) + ")");
  cc.liveness_fd = sv[0];
  auto c = (*ctx)->create_connection(cc);
  ASSERT_TRUE(c.is_ok());
  auto remote = exchange_endpoint(sv[0], (*c)->local_info(), milliseconds(20000), "rank 1");
  ASSERT_TRUE(remote.is_ok()) << remote.status().message();
  ASSERT_TRUE((*c)->connect(*remote).is_ok());
  char ready = 0;
  ASSERT_EQ(read(sv[0], &ready, 1), 1);
  kill(child, SIGKILL);
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::uint8_t> buf(4096);
  auto mr = (*ctx)->register_buffer(buf.data(), buf.size());
  ASSERT_TRUE(mr.is_ok()) << mr.status().message();
  Status s = (*c)->irecv(buf.data(), buf.size(), *mr).status();
  if (s.is_ok()) s = (*ctx)->wait_recvs(**c);
  const auto ms = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0).count();
  close(sv[0]);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("closed its connection"), std::string::npos) << s.message();
  EXPECT_LT(ms, timeout.count()) << "the error came only at the timeout";
  std::printf("after %lld ms: %s\n", static_cast<long long>(ms), s.message().c_str());
}

}  // namespace
}  // namespace weft::verbs::testing
