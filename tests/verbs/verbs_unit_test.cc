// Verbs building blocks that need no RDMA device: source-port mapping, GID
// choice, the endpoint record, status names, memory regions and
// cleanup that goes on past a failure.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "weft/verbs/device.h"
#include "weft/verbs/error.h"
#include "weft/verbs/handle.h"
#include "weft/verbs/memory_region.h"
#include "weft/verbs/rc_qp.h"
#include "weft/verbs/source_port.h"

namespace weft::verbs {
namespace {

class PlannedPort : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(PlannedPort, FlowLabelMapsBackToExactlyThatPortUnderTheKernelFormula) {
  auto fl = flow_label_for_sport(GetParam());
  ASSERT_TRUE(fl.is_ok()) << fl.status().message();
  EXPECT_EQ(*fl, GetParam() - 0xC000);
  EXPECT_NE(*fl, 0u) << "flow label 0 makes the kernel hash the QPNs instead";
  EXPECT_EQ(udp_sport_for_flow_label(*fl), GetParam());
}
INSTANTIATE_TEST_SUITE_P(Ports, PlannedPort, ::testing::Values(49153u, 49154u, 50000u, 55555u, 61234u, 65535u));

// Label 0 would mean "hash the QP numbers": 49152 takes the next label that
// the kernel folds to it.
TEST(PlannedPortRange, TheLowestPortGetsANonZeroLabelThatFoldsToIt) {
  auto fl = flow_label_for_sport(49152);
  ASSERT_TRUE(fl.is_ok()) << fl.status().message();
  EXPECT_EQ(*fl, 0x4001u);
  EXPECT_EQ(udp_sport_for_flow_label(*fl), 49152);
}

TEST(PlannedPortRange, PortsTheFlowLabelCannotExpressAreRejectedWithTheReason) {
  for (std::uint32_t p : {0u, 4791u, 12345u, 49151u}) {
    auto fl = flow_label_for_sport(p);
    ASSERT_FALSE(fl.is_ok()) << p;
    EXPECT_EQ(fl.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(fl.status().message().find(std::to_string(p)), std::string::npos) << fl.status().message();
    EXPECT_NE(fl.status().message().find("49152..65535"), std::string::npos) << fl.status().message();
  }
  EXPECT_FALSE(flow_label_for_sport(65536).is_ok());
}

TEST(PlannedPortRange, KernelFormulaFoldsHighFlowLabelBitsIntoTheLowOnes) {
  // rdma_flow_label_to_udp_sport: low 14 bits XOR bits 14..19, OR 0xC000.
  EXPECT_EQ(udp_sport_for_flow_label(0x00000), 0xC000);
  EXPECT_EQ(udp_sport_for_flow_label(0x3FFFF), 0xC000 | (0x3FFF ^ 0xF));
  EXPECT_EQ(udp_sport_for_flow_label(0xFFFFF), 0xC000 | (0x3FFF ^ 0x3F));
}

TEST(QpConfig, AnUnexpressiblePlannedPortIsRejectedBeforeAnyQpExists) {
  RcQpConfig c;
  c.planned_sport = 4791;
  Status s = validate(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  c.planned_sport = 0;
  c.retry_cnt = 8;
  EXPECT_EQ(validate(c).code(), StatusCode::kInvalidArgument);
}

GidEntry gid(std::uint32_t index, GidType type, std::vector<std::uint8_t> tail) {
  GidEntry e;
  e.index = index;
  e.type = type;
  for (std::size_t i = 0; i < tail.size(); ++i) e.gid[16 - tail.size() + i] = tail[i];
  return e;
}
GidEntry v4(std::uint32_t index, GidType type, std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  return gid(index, type, {0xff, 0xff, a, b, c, d});
}

TEST(GidChoice, PicksTheFirstRoceV2Ipv4MappedEntry) {
  GidEntry link_local = gid(0, GidType::kRoceV2, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8});
  link_local.gid[0] = 0xfe;
  std::vector<GidEntry> t = {link_local, v4(1, GidType::kRoceV1, 10, 0, 0, 7), v4(3, GidType::kRoceV2, 10, 0, 0, 7),
                             v4(5, GidType::kRoceV2, 10, 0, 1, 9)};
  auto g = select_gid(t, std::nullopt, "");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->index, 3u);
  EXPECT_EQ(g->ipv4(), "10.0.0.7");
  auto h = select_gid(t, std::nullopt, "10.0.1.9");
  ASSERT_TRUE(h.is_ok());
  EXPECT_EQ(h->index, 5u);
}

TEST(GidChoice, OverrideIndexWinsButMustBeRoceV2) {
  std::vector<GidEntry> t = {v4(1, GidType::kRoceV1, 10, 0, 0, 7), v4(3, GidType::kRoceV2, 10, 0, 0, 7),
                             v4(4, GidType::kRoceV2, 10, 0, 0, 8)};
  auto g = select_gid(t, 4u, "");
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(g->index, 4u);
  auto v1 = select_gid(t, 1u, "");
  ASSERT_FALSE(v1.is_ok());
  EXPECT_NE(v1.status().message().find("not RoCE v2"), std::string::npos);
  auto missing = select_gid(t, 9u, "");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(GidChoice, NoIpv4AddressGivesAnErrorThatSaysWhatToConfigure) {
  std::vector<GidEntry> t = {v4(1, GidType::kRoceV1, 10, 0, 0, 7)};
  auto g = select_gid(t, std::nullopt, "");
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("IPv4"), std::string::npos);
  auto h = select_gid(t, std::nullopt, "10.9.9.9");
  EXPECT_NE(h.status().message().find("10.9.9.9"), std::string::npos);
}

TEST(EndpointRecord, RoundTripsEveryField) {
  EndpointInfo e;
  e.qpn = 0x123456;
  e.psn = 0xABCDEF;
  for (int i = 0; i < 16; ++i) e.gid[i] = static_cast<std::uint8_t>(i * 7 + 1);
  e.mtu_bytes = 1024;
  e.recv_depth = 13;
  e.max_msg_bytes = 0x80000000u;
  auto d = decode(encode(e));
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  EXPECT_EQ(d->qpn, e.qpn);
  EXPECT_EQ(d->psn, e.psn);
  EXPECT_EQ(d->gid, e.gid);
  EXPECT_EQ(d->mtu_bytes, 1024u);
  EXPECT_EQ(d->recv_depth, 13u);
  EXPECT_EQ(d->max_msg_bytes, 0x80000000u);
}

TEST(EndpointRecord, ForeignOrCorruptRecordsAreRejectedByName) {
  EndpointInfo e;
  e.qpn = 17;
  e.mtu_bytes = 1024;
  e.recv_depth = 64;
  e.max_msg_bytes = 1 << 20;
  ASSERT_TRUE(decode(encode(e)).is_ok());
  EndpointWire w = encode(e);
  w.bytes[0] ^= 1;
  EXPECT_NE(decode(w).status().message().find("magic"), std::string::npos);
  e.mtu_bytes = 1500;
  EXPECT_NE(decode(encode(e)).status().message().find("MTU 1500"), std::string::npos);
  e.mtu_bytes = 1024;
  e.qpn = 0;
  EXPECT_NE(decode(encode(e)).status().message().find("QPN"), std::string::npos);
  e.qpn = 17;
  e.recv_depth = 1;
  EXPECT_NE(decode(encode(e)).status().message().find("receive depth 1"), std::string::npos);
  e.recv_depth = 64;
  e.max_msg_bytes = 100;
  EXPECT_NE(decode(encode(e)).status().message().find("message limit 100"), std::string::npos);
}

TEST(StatusNames, CompletionErrorsAreNamedNotNumbered) {
  EXPECT_EQ(wc_status_name(IBV_WC_RETRY_EXC_ERR), "IBV_WC_RETRY_EXC_ERR");
  EXPECT_EQ(wc_status_name(IBV_WC_WR_FLUSH_ERR), "IBV_WC_WR_FLUSH_ERR");
  EXPECT_EQ(wc_status_name(static_cast<ibv_wc_status>(99)), "IBV_WC_<unknown 99>");
  ibv_wc wc{};
  wc.status = IBV_WC_REM_ACCESS_ERR;
  wc.wr_id = 7;
  wc.qp_num = 0x11;
  std::string d = describe_completion(wc);
  EXPECT_EQ(d, "IBV_WC_REM_ACCESS_ERR (remote access error), wr_id 7, qp 0x11, vendor_err 0x0");
}

// A registrar that hands out fake keys and records what it was asked.
class CountingRegistrar : public MemoryRegistrar {
 public:
  Result<Region> register_region(void* addr, std::size_t len, int access) override {
    ++registers;
    last_len = len;
    (void)access;
    (void)addr;
    auto* h = new int(next_key);
    live[h] = true;
    return Region{h, static_cast<std::uint32_t>(next_key), static_cast<std::uint32_t>(next_key++ + 1000)};
  }
  Status deregister_region(void* handle) override {
    ++deregisters;
    live.erase(static_cast<int*>(handle));
    delete static_cast<int*>(handle);
    return ok_status();
  }
  int registers = 0, deregisters = 0, next_key = 1;
  std::size_t last_len = 0;
  std::map<int*, bool> live;
};

TEST(MemoryRegion, CoversWholePagesAndIsDeregisteredWithItsLastReference) {
  CountingRegistrar r;
  alignas(4096) static std::uint8_t buf[3 * 4096];
  auto a = register_region(r, buf + 5, 4096, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(r.last_len, 2u * 4096) << "[buf+5, buf+4101) lies on two pages";
  EXPECT_EQ((*a)->begin, reinterpret_cast<std::uintptr_t>(buf));
  EXPECT_EQ((*a)->end, reinterpret_cast<std::uintptr_t>(buf) + 2 * 4096);
  RegionRef in_flight = *a;  // a message still using it
  a = Result<RegionRef>(invalid_argument("released"));
  EXPECT_EQ(r.deregisters, 0) << "a region still in use stays registered";
  in_flight.reset();
  EXPECT_EQ(r.deregisters, 1) << "and goes when its last user lets go";
  EXPECT_TRUE(r.live.empty());
}

TEST(MemoryRegion, TheSameRangeAgainIsRegisteredAgainNeverServedFromACache) {
  CountingRegistrar r;
  alignas(4096) static std::uint8_t buf[4096];
  auto a = register_region(r, buf, 100, IBV_ACCESS_LOCAL_WRITE);
  auto b = register_region(r, buf, 100, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(r.registers, 2) << "a region is only as good as its owner's promise: no sharing by address";
  EXPECT_NE((*a)->lkey, (*b)->lkey);
}

TEST(MemoryRegion, EmptyAndWrappingRangesAreRejectedWithoutRegistering) {
  CountingRegistrar r;
  std::uint8_t x = 0;
  auto empty = register_region(r, &x, 0, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_FALSE(empty.is_ok());
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos) << empty.status().message();
  auto wraps = register_region(r, reinterpret_cast<void*>(UINTPTR_MAX - 100), 4096, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_FALSE(wraps.is_ok());
  EXPECT_NE(wraps.status().message().find("wraps"), std::string::npos) << wraps.status().message();
  EXPECT_EQ(r.registers, 0);
}

// Cleanup: a failing destroy is reported and the others still run.
std::vector<std::string>* g_destroyed = nullptr;
struct Fake {
  std::string name;
  int rc;
};
int destroy_fake(Fake* f) {
  g_destroyed->push_back(f->name);
  int rc = f->rc;
  delete f;
  return rc;
}
constexpr char kFakeName[] = "destroy_fake";
using FakeHandle = Handle<Fake, destroy_fake, kFakeName>;

TEST(Cleanup, AFailingDestroyDoesNotStopTheOthers) {
  std::vector<std::string> destroyed;
  g_destroyed = &destroyed;
  {
    struct Composite {  // like a connection: members die in reverse order
      FakeHandle first{new Fake{"first", 0}};
      FakeHandle second{new Fake{"second", EBUSY}};
      FakeHandle third{new Fake{"third", 0}};
    } c;
  }
  EXPECT_EQ(destroyed, (std::vector<std::string>{"third", "second", "first"}));
  destroyed.clear();
  FakeHandle a(new Fake{"a", EBUSY}), b(new Fake{"b", 0}), d(new Fake{"d", EINVAL});
  CleanupErrors errors;
  errors.add(a.close());
  errors.add(b.close());
  errors.add(d.close());
  EXPECT_EQ(destroyed, (std::vector<std::string>{"a", "b", "d"}));
  EXPECT_EQ(errors.status().message(), "2 cleanup step(s) failed: destroy_fake: Device or resource busy; "
                                       "destroy_fake: Invalid argument");
  EXPECT_FALSE(a);
  EXPECT_TRUE(a.close().is_ok()) << "closing twice is a no-op";
  g_destroyed = nullptr;
}

}  // namespace
}  // namespace weft::verbs
