// The handle NCCL carries between ranks and the plan lookup, without devices.
#include <gtest/gtest.h>

#include "weft/nccl_net/ports.h"
#include "weft/nccl_net/wire.h"

namespace weft::nccl_net {
namespace {

TEST(Handle, RoundTripsAddressPortAndSerial) {
  ListenHandle h{ipv4_value("10.78.0.2"), 40123, 7};
  auto b = encode_handle(h);
  ASSERT_EQ(b.size(), 128u);
  auto back = decode_handle(b.data());
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(ipv4_string(back->nic_ipv4), "10.78.0.2");
  EXPECT_EQ(back->tcp_port, 40123);
  EXPECT_EQ(back->serial, 7u);
}

TEST(Handle, IgnoresTheConnectorsOwnStateBytes) {
  auto b = encode_handle({ipv4_value("10.0.0.1"), 1, 0});
  b[kHandleStateOffset] = 0xAB;
  b[127] = 0xCD;
  EXPECT_TRUE(decode_handle(b.data()));
}

struct Malformed {
  std::size_t byte;
  std::uint8_t value;
  const char* error;
};
class MalformedHandle : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedHandle, IsRefusedNamingWhatIsWrong) {
  auto b = encode_handle({ipv4_value("10.78.0.1"), 4000, 3});
  b[GetParam().byte] = GetParam().value;
  auto r = decode_handle(b.data());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedHandle,
    ::testing::Values(
        Malformed{0, 0x00, "connection handle has magic 0x00464e43, not weft's 0x57464e43 (another plugin's handle?)"},
        Malformed{5, 0x01, "connection handle version 1, this plugin speaks 2"},
        Malformed{119, 0x01, "connection handle byte 119 is 0x01, must be 0"},
        Malformed{16, 0xFF, "connection handle byte 16 is 0xff, must be 0"}));

TEST(Handle, WithoutPortOrAddressIsRefused) {
  auto b = encode_handle({ipv4_value("10.78.0.1"), 0, 3});
  EXPECT_EQ(decode_handle(b.data()).status().message(), "connection handle names no address or port");
  EXPECT_EQ(decode_handle(nullptr).status().message(), "connection handle is NULL");
}

TEST(Hello, RoundTripsAndRefusesAWrongQpCount) {
  Hello h{ipv4_value("10.78.0.1"), 5, std::vector<verbs::EndpointWire>(3)};
  h.qps[2].bytes[63] = 9;
  auto b = encode_hello(h);
  ASSERT_EQ(b.size(), kHelloHeaderBytes + 3 * 64);
  auto back = decode_hello(b.data(), b.size());
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->serial, 5u);
  EXPECT_EQ(back->qps[2].bytes[63], 9);
  EXPECT_EQ(back->traffic_class, -1);
  EXPECT_EQ(decode_hello(b.data(), b.size() - 1).status().message(), "peer's hello is 211 bytes, 3 QPs need 212");
  b[7] = 17;
  EXPECT_EQ(hello_qp_count(b.data()).status().message(), "peer's hello announces 17 QPs (1..16)");
}

// The connector's traffic class reaches the listener, which gives its QPs
// (ACKs, credits) the same class; any class 0..255, or none.
TEST(Hello, CarriesTheTrafficClassOrNone) {
  for (int tc : {-1, 0, 106, 255}) {
    Hello h{ipv4_value("10.78.0.1"), 2, std::vector<verbs::EndpointWire>(1), tc};
    auto b = encode_hello(h);
    auto back = decode_hello(b.data(), b.size());
    ASSERT_TRUE(back) << back.status().message();
    EXPECT_EQ(back->traffic_class, tc);
  }
  Hello h{ipv4_value("10.78.0.1"), 2, std::vector<verbs::EndpointWire>(1), 106};
  auto b = encode_hello(h);
  b[16] = 2;  // neither 0 nor 0x100 | class
  EXPECT_EQ(decode_hello(b.data(), b.size()).status().message(),
            "peer's hello has 0x026a 0x0000 where a traffic class and zeros belong");
  b[16] = 1;
  b[19] = 1;
  EXPECT_EQ(decode_hello(b.data(), b.size()).status().message(),
            "peer's hello has 0x016a 0x0001 where a traffic class and zeros belong");
  b[19] = 0;
  b[5] = 1;  // a version-1 peer (no traffic class in its hello)
  EXPECT_EQ(hello_qp_count(b.data()).status().message(),
            "peer's hello has magic 0x57464e48 version 1, expected 0x57464e48 version 2");
}

routing::RoutePlan plan_of(std::vector<routing::PlanFlow> flows) {
  routing::RoutePlan p;
  p.collective = "nccl";
  p.ranks = 2;
  p.flows = std::move(flows);
  return p;
}

routing::PlanFlow flow(const char* src, const char* dst, int conn, int qp, std::uint16_t sport, const char* proto = "udp") {
  routing::PlanFlow f;
  f.src_rank = 0;
  f.dst_rank = 1;
  f.src_addr = src;
  f.dst_addr = dst;
  f.conn = conn;
  f.qp = qp;
  f.sport = sport;
  f.dport = 4791;
  f.protocol = proto;
  return f;
}

TEST(ChoosePort, WithoutAPlanIsLabelZeroAsNcclSetsIt) {
  PortChoice c = choose_port(nullptr, "10.0.0.1", "10.0.0.2", 0, 0);
  EXPECT_EQ(c.kind, PortChoice::kNoPlan);
  EXPECT_EQ(c.flow_label, 0u);
}

TEST(ChoosePort, APlannedQpGetsSportMinus0xC000) {
  auto p = plan_of({flow("10.0.0.1", "10.0.0.2", 2, 3, 0xC000 + 0x1234), flow("10.0.0.1", "10.0.0.2", 2, 0, 65535)});
  PortChoice c = choose_port(&p, "10.0.0.1", "10.0.0.2", 2, 3);
  EXPECT_EQ(c.kind, PortChoice::kPlanned);
  EXPECT_EQ(c.flow_label, 0x1234u);
  EXPECT_EQ(c.sport, 0xC000 + 0x1234);
  EXPECT_EQ(choose_port(&p, "10.0.0.1", "10.0.0.2", 2, 0).flow_label, 0x3FFFu);
}

// Label 0 means "hash the QP numbers": the lowest port gets 0x4001, which
// the kernel folds to it.
TEST(ChoosePort, TheLowestPortIsPlannedWithANonZeroLabel) {
  auto p = plan_of({flow("10.0.0.1", "10.0.0.2", 0, 0, 49152)});
  PortChoice c = choose_port(&p, "10.0.0.1", "10.0.0.2", 0, 0);
  EXPECT_EQ(c.kind, PortChoice::kPlanned);
  EXPECT_EQ(c.flow_label, 0x4001u);
  EXPECT_EQ(c.sport, 49152);
}

TEST(ChoosePort, AMissingOrUnapplicableEntrySaysWhy) {
  auto p = plan_of({flow("10.0.0.1", "10.0.0.2", 0, 0, 40000), flow("10.0.0.1", "10.0.0.2", 0, 1, 50000, "tcp")});
  PortChoice low = choose_port(&p, "10.0.0.1", "10.0.0.2", 0, 0);
  EXPECT_EQ(low.kind, PortChoice::kUnapplicable);
  EXPECT_EQ(low.flow_label, 0u);
  EXPECT_NE(low.why.find("plan flow 10.0.0.1 -> 10.0.0.2 conn 0 qp 0: "), std::string::npos) << low.why;
  PortChoice tcp = choose_port(&p, "10.0.0.1", "10.0.0.2", 0, 1);
  EXPECT_EQ(tcp.kind, PortChoice::kUnapplicable);
  EXPECT_EQ(tcp.why, "plan flow 10.0.0.1 -> 10.0.0.2 conn 0 qp 1 is tcp, not udp (RoCE v2)");
  PortChoice miss = choose_port(&p, "10.0.0.2", "10.0.0.1", 0, 0);
  EXPECT_EQ(miss.kind, PortChoice::kNotInPlan);
  EXPECT_EQ(miss.why, "the plan has no flow 10.0.0.2 -> 10.0.0.1 conn 0 qp 0");
}

}  // namespace
}  // namespace weft::nccl_net
